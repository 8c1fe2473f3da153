// The official TypeScript MCP SDK client driving actiond's /mcp over Streamable HTTP.
//
// Run by services/api/tests/mcp (the Rust test owns the database and moves the proposal through
// its states). Protocol with the test: this script prints one JSON event per line on stdout and
// reads one command per line on stdin.
//
// env: ACTIOND_MCP_URL (http://127.0.0.1:PORT/mcp), ACTIOND_TOKEN, ACTIOND_TRANSCRIPT (file to
// write the HTTP transcript to, token redacted).
import { writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const url = process.env.ACTIOND_MCP_URL;
const token = process.env.ACTIOND_TOKEN;
const transcriptPath = process.env.ACTIOND_TRANSCRIPT;
if (!url || !token) throw new Error('ACTIOND_MCP_URL and ACTIOND_TOKEN are required');

const emit = (event) => process.stdout.write(JSON.stringify(event) + '\n');
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const expectCommand = async (want) => {
  const { value, done } = await lines.next();
  if (done || value.trim() !== want) throw new Error(`expected command ${want}, got ${done ? 'EOF' : value}`);
};
const check = (cond, what) => {
  if (!cond) throw new Error(`check failed: ${what}`);
};

// Every HTTP exchange, as the SDK sent and received it (Authorization redacted).
const transcript = [];
const recordingFetch = async (input, init = {}) => {
  const headers = Object.fromEntries(new Headers(init.headers ?? {}).entries());
  if (headers.authorization) headers.authorization = 'Bearer <redacted>';
  const entry = { request: { method: init.method ?? 'GET', url: String(input), headers, body: parse(init.body) } };
  transcript.push(entry);
  const response = await fetch(input, init);
  const text = await response.clone().text().catch(() => '');
  entry.response = {
    status: response.status,
    content_type: response.headers.get('content-type'),
    session_id: response.headers.get('mcp-session-id'),
    body: parse(text),
  };
  return response;
};
function parse(body) {
  if (typeof body !== 'string' || body === '') return body ?? null;
  try {
    return JSON.parse(body);
  } catch {
    return body;
  }
}
const save = () => {
  if (transcriptPath) writeFileSync(transcriptPath, JSON.stringify(transcript, null, 2) + '\n');
};

const client = new Client({ name: 'actiond-e2e-ts', version: '1.0.0' });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
  fetch: recordingFetch,
});

try {
  await client.connect(transport);
  emit({ event: 'connected', server: client.getServerVersion(), capabilities: client.getServerCapabilities() });

  const { tools } = await client.listTools();
  check(JSON.stringify(tools.map((t) => t.name)) === JSON.stringify(['propose_action', 'check_proposal']), 'exactly two tools');
  emit({ event: 'tools', tools });

  // A bad amount comes back as a tool result with isError, naming the field: nothing is filed.
  const invalid = await client.callTool({
    name: 'propose_action',
    arguments: { action: 'billing.refund.issue', params: { payment_id: 'pi_ts_1042', amount: '120.00', currency: 'USD' } },
  });
  check(invalid.isError === true, 'invalid amount is a tool error');
  check(invalid.structuredContent.errors.some((e) => e.field === 'params.amount'), 'the error names params.amount');
  emit({ event: 'invalid', result: invalid.structuredContent });

  // 120.00 USD: over the tenant's 50.00 limit, so it will escalate.
  const args = {
    action: 'billing.refund.issue',
    params: { payment_id: 'pi_ts_1042', amount: 12000, currency: 'USD', reason: 'requested_by_customer' },
    reason: 'Customer asked for a full refund of order 1042 (damaged item).',
    source_text: 'Ticket #1042: "My order arrived broken, please refund the 120.00 USD."',
    session: 'ts-e2e-session',
    idempotency_key: 'ts-e2e-refund-1042',
  };
  const proposed = await client.callTool({ name: 'propose_action', arguments: args });
  check(proposed.isError === false, 'propose_action succeeded');
  const id = proposed.structuredContent.proposal_id;
  check(proposed.structuredContent.state === 'pending', 'a new proposal is pending');
  emit({ event: 'proposed', proposal_id: id, result: proposed.structuredContent });

  await expectCommand('escalated');
  const escalated = await client.callTool({ name: 'check_proposal', arguments: { proposal_id: id } });
  check(escalated.structuredContent.state === 'escalated', 'check_proposal says escalated');
  emit({ event: 'escalated', result: escalated.structuredContent });

  // The same idempotency key and arguments give the same proposal back.
  const again = await client.callTool({ name: 'propose_action', arguments: args });
  check(again.structuredContent.proposal_id === id && again.structuredContent.replayed === true, 'idempotent replay');
  emit({ event: 'replayed', result: again.structuredContent });

  // Not one of the two tools: a JSON-RPC error at call time.
  let refused = null;
  try {
    await client.callTool({ name: 'shell_exec', arguments: { command: 'id' } });
  } catch (e) {
    refused = { code: e.code, message: e.message };
  }
  check(refused !== null && refused.code === -32602, 'unknown tool is a JSON-RPC error');
  emit({ event: 'unknown_tool', error: refused });

  // Long-poll until a final state; the test approves and executes meanwhile.
  emit({ event: 'waiting' });
  const finals = new Set(['succeeded', 'failed', 'outcome_unknown', 'blocked', 'denied', 'expired']);
  const seen = [];
  let last = escalated.structuredContent;
  for (let i = 0; i < 10 && !finals.has(last.state); i++) {
    const r = await client.callTool({ name: 'check_proposal', arguments: { proposal_id: id, wait_seconds: 30 } });
    last = r.structuredContent;
    seen.push(last.state);
  }
  emit({ event: 'final', states: seen, result: last });
  check(last.state === 'succeeded' && last.outcome === 'succeeded', 'final outcome succeeded');
  await client.close();
  emit({ event: 'done' });
} catch (e) {
  emit({ event: 'error', message: String(e?.stack ?? e) });
  process.exitCode = 1;
} finally {
  save();
  lines.return?.();
  process.stdin.destroy();
}
