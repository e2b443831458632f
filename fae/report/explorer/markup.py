"""HTML from hostile text: every value from the log escaped, hidden characters shown, links built only here.

Nothing a log holds reaches a page as markup: a string is escaped with ``text`` (or ``block`` keeping its line
breaks), a link is a path of fae's own with its parts percent-encoded, and the pages' one script (``SCRIPT``)
is fixed text that reads the DOM with ``textContent`` and never writes HTML. A Content-Security-Policy allows
that script alone (by its hash), so even an escaping mistake could not run a log's ``<script>``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from fae.util.visible import visible

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2733;background:#fbfbfc}
header{background:#1d3557;color:#fff;padding:14px 24px}header h1{margin:0;font-size:21px}
header p{margin:4px 0 0;opacity:.9}header a{color:#fff}main{max-width:1320px;margin:0 auto;padding:8px 20px 40px}
section{background:#fff;border:1px solid #e3e6ea;border-radius:6px;padding:12px 16px;margin:14px 0}
h2{font-size:17px;margin:0 0 8px}h3{font-size:14px;margin:10px 0 4px}.note{color:#555;font-size:13px;margin:6px 0}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #eceef1;padding:3px 8px;text-align:left;vertical-align:top}td.n{text-align:right}
th{background:#f3f5f8;position:sticky;top:0;cursor:pointer;white-space:nowrap}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
input.filter{font:inherit;font-size:13px;padding:3px 6px;margin:4px 8px 2px 0;width:16em}
.count{color:#555;font-size:12px}a{color:#1d4f91}
pre{background:#f5f6f8;padding:8px;overflow:auto;font-size:12px;border-radius:4px;max-height:28em;
white-space:pre-wrap;overflow-wrap:anywhere;margin:4px 0}
details{margin:3px 0}summary{cursor:pointer;color:#1d3557}
.pass{color:#1a7f37;font-weight:600}.fail{color:#b3261e;font-weight:600}.unknown{color:#8a6d00;font-weight:600}
ol.timeline{list-style:none;padding:0;margin:0}ol.timeline>li{border-left:4px solid #c9ced6;padding:3px 10px;
margin:2px 0}.t{color:#555;font-variant-numeric:tabular-nums;display:inline-block;min-width:5.5em}
.actor{display:inline-block;min-width:5.5em;color:#555}.kind{font-weight:600;margin-right:6px}
li.k-LlmCalled{border-color:#0072b2}li.k-ToolCalled{border-color:#e69f00}li.k-HttpExchanged{border-color:#009e73}
li.k-FhirInteracted{border-color:#56b4e9}li.k-AnswerGiven{border-color:#cc79a7}li.k-RunFailed,li.fault{border-color:#d55e00;
background:#fff4ee}.diff-add{color:#1a7f37}.diff-del{color:#b3261e}
.grid td{text-align:center}
.grid th{white-space:normal;min-width:5em;max-width:11em;overflow-wrap:anywhere}
.grid td:first-child,table.runs td:first-child{white-space:nowrap;text-align:left}
@media (max-width:900px){main{padding:4px 8px 30px}section{padding:10px 10px}}
"""

SCRIPT = """(function(){
function key(cell){var v=cell.getAttribute('data-v');if(v===null){v=cell.textContent.trim();}
if(v===''){return null;}var n=Number(v);return isNaN(n)?v.toLowerCase():n;}
function order(a,b){if(a===null){return b===null?0:1;}if(b===null){return -1;}
if(typeof a===typeof b){return a<b?-1:(a>b?1:0);}return typeof a==='number'?-1:1;}
document.querySelectorAll('table.data').forEach(function(table){
var body=table.tBodies[0];if(!body){return;}var heads=table.tHead.rows[0].cells;var total=body.rows.length;
var box=document.createElement('input');box.type='search';box.className='filter';box.placeholder='filter rows';
box.setAttribute('aria-label','filter rows');var count=document.createElement('span');count.className='count';
count.textContent=total+' rows';var bar=document.createElement('div');bar.appendChild(box);bar.appendChild(count);
var holder=table.parentNode.classList.contains('scroll')?table.parentNode:table;
holder.parentNode.insertBefore(bar,holder);
box.addEventListener('input',function(){var words=box.value.toLowerCase().split(/\\s+/).filter(Boolean);var shown=0;
Array.prototype.forEach.call(body.rows,function(row){var said=row.textContent.toLowerCase();
var keep=words.every(function(w){return said.indexOf(w)>=0;});row.hidden=!keep;if(keep){shown++;}});
count.textContent=words.length?shown+' of '+total+' rows':total+' rows';});
Array.prototype.forEach.call(heads,function(head,column){head.tabIndex=0;head.title='sort';
function sort(){var up=head.getAttribute('aria-sort')!=='ascending';
Array.prototype.forEach.call(heads,function(h){h.removeAttribute('aria-sort');});
head.setAttribute('aria-sort',up?'ascending':'descending');var rows=Array.prototype.slice.call(body.rows);
rows.sort(function(a,b){var x=key(a.cells[column]),y=key(b.cells[column]);
if(x===null||y===null){return order(x,y);}return up?order(x,y):order(y,x);});
rows.forEach(function(row){body.appendChild(row);});}
head.addEventListener('click',sort);head.addEventListener('keydown',function(e){if(e.key==='Enter'){sort();}});});
});})();"""

SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
POLICY = (
    f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src '{SCRIPT_HASH}'; "
    "form-action 'self'; base-uri 'none'"
)
"""The pages' Content-Security-Policy: nothing remote, no script but ``SCRIPT``; forms only to the server."""


def text(value: Any) -> str:
    """A value from the log as HTML text: markup escaped, hidden characters (a bidi override) as escapes."""
    if value is None:
        return ""
    return html.escape(visible(value if isinstance(value, str) else str(value)))


def block(value: str) -> str:
    """Several lines of text from the log for a ``<pre>``: each line as ``text``, the line breaks kept."""
    return "\n".join(text(part) for part in value.split("\n"))


def pretty(value: Any, limit: int = 65_536) -> str:
    """A JSON value or body as an indented ``<pre>``, cut at ``limit`` characters with the rest counted."""
    if isinstance(value, bytes):
        try:
            value = json.loads(value)
        except ValueError:
            value = value.decode("utf-8", "replace")
    shown = value if isinstance(value, str) else json.dumps(value, indent=2, sort_keys=True, default=str)
    more = len(shown) - limit
    cut = shown[:limit] + (f"\n… {more} more characters" if more > 0 else "")
    return f"<pre>{block(cut)}</pre>"


def href(path: str, query: Mapping[str, Any] | None = None) -> str:
    """A link of fae's own, escaped for an attribute: a fixed path, each part of the query percent-encoded."""
    found = {k: str(v) for k, v in (query or {}).items() if v is not None}
    return html.escape(path + ("?" + urlencode(found) if found else ""), quote=True)


def run_href(run_id: str) -> str:
    """The run page's link: the id percent-encoded whole, so no id can become a scheme or leave ``/run/``."""
    return html.escape("/run/" + quote(run_id, safe=""), quote=True)


def page(title: str, heading: str, subtitle: str, body: str) -> str:
    """A whole page around ``body`` (already HTML): the policy, the style and the script."""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{text(title)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>{text(heading)}</h1><p>{subtitle}</p></header><main>{body}</main>"
        f"<script>{SCRIPT}</script></body></html>\n"
    )
