// A program agent for fae on the official MCP TypeScript SDK and the openai package.
//
// Nothing in it knows fae beyond the environment it is given: the task in FAE_PROMPT_FILE, the FHIR MCP
// server at FAE_MCP_URL (streamable HTTP), and the model behind OPENAI_BASE_URL, which the openai package
// reads by itself (as it reads OPENAI_API_KEY). It logs each step on stdout and writes its final answer to
// FAE_ANSWER_FILE, which fae takes over stdout.
//
//   npm ci --prefix docs/examples/node-agent
//   fae record --task rec-create-patient --llm-url https://api.openai.com/v1 --model gpt-4.1-mini \
//       --agent 'cmd:node docs/examples/node-agent/agent.mjs'

import { readFileSync, writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import OpenAI from "openai";

const MAX_TURNS = 15;
const SYSTEM =
  "You work on a FHIR R4 server through the tools given. Use them to do the task, " +
  "then give the final answer in the answer tags the task asks for.";

function toolText(result) {
  return (result.content ?? [])
    .filter((block) => block.type === "text")
    .map((block) => block.text)
    .join("\n");
}

async function main() {
  const prompt = readFileSync(process.env.FAE_PROMPT_FILE, "utf8");
  const model = process.env.FAE_MODEL ?? "gpt-4.1-mini";
  const openai = new OpenAI();
  const mcp = new Client({ name: "fae-example-node-agent", version: "1.0.0" });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(process.env.FAE_MCP_URL)));
  try {
    const { tools } = await mcp.listTools();
    const functions = tools.map((tool) => ({
      type: "function",
      function: { name: tool.name, description: tool.description ?? "", parameters: tool.inputSchema },
    }));
    const messages = [
      { role: "system", content: SYSTEM },
      { role: "user", content: prompt },
    ];
    for (let turn = 1; turn <= MAX_TURNS; turn++) {
      const reply = await openai.chat.completions.create({ model, messages, tools: functions, tool_choice: "auto" });
      const message = reply.choices[0].message;
      console.log(`turn ${turn}: ${reply.usage?.total_tokens ?? "?"} tokens, ${message.tool_calls?.length ?? 0} calls`);
      messages.push({ role: "assistant", content: message.content, tool_calls: message.tool_calls });
      if (!message.tool_calls?.length) {
        writeFileSync(process.env.FAE_ANSWER_FILE, message.content ?? "");
        return 0;
      }
      for (const call of message.tool_calls) {
        const result = await mcp.callTool({ name: call.function.name, arguments: JSON.parse(call.function.arguments || "{}") });
        console.log(`  ${call.function.name}: ${result.isError ? "error" : "ok"}`);
        messages.push({ role: "tool", tool_call_id: call.id, content: toolText(result) });
      }
    }
    console.error(`no answer after ${MAX_TURNS} model turns`);
    return 2;
  } finally {
    await mcp.close();
  }
}

process.exitCode = await main();
