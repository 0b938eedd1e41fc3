// The relay's token ledger (seed 000, section 2) through node-redis.
//
// Usage: node relay.mjs HOST PORT KEY_ID
//
// Run by TestRESPClients (cmd/spent/resp_clients_test.go) against a spent
// whose [resp] maps "tokens:redeemed:" to a refuse namespace with a rollback
// window. node-redis comes from node_modules beside it (npm ci here). Prints
// one line per step and exits non-zero on the first answer that is not the
// expected one.

import { createRequire } from 'node:module';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';

const version = createRequire(import.meta.url)('redis/package.json').version;

const TTL = 108000; // 30 h: the key epoch (24 h) and the grace window (6 h)
const BURST = 200;

const [host, portArg, keyId] = process.argv.slice(2);
const port = Number(portArg);

function fail(msg) {
  console.log('FAIL ' + msg);
  process.exit(1);
}

function expect(step, got, want) {
  if (got !== want) fail(`${step}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

const token = () => `tokens:redeemed:${keyId}:${randomBytes(16).toString('hex')}`;
const setOpts = { condition: 'NX', expiration: { type: 'EX', value: TTL } };
const spend = (c, key) => c.set(key, '1', setOpts);

async function connect(resp) {
  const c = createClient({ socket: { host, port, reconnectStrategy: false }, RESP: resp });
  c.on('error', (e) => fail(`connection (RESP${resp}): ${e.message}`));
  await c.connect();
  return c;
}

// burst sends the SETs as one pipeline (execAsPipeline: no MULTI/EXEC).
async function burst(c, keys, want, step) {
  const m = c.multi();
  for (const k of keys) m.set(k, '1', setOpts);
  const got = await m.execAsPipeline();
  if (got.length !== keys.length) fail(`${step}: ${got.length} replies for ${keys.length} commands`);
  keys.forEach((k, i) => expect(`${step} ${k}`, got[i], want));
}

async function main() {
  console.log(`client node-redis ${version}`);
  const c = await connect(2);

  // 1. Spend a token: fresh.
  const t1 = token();
  expect('spend1', await spend(c, t1), 'OK');
  const spent1 = performance.now();
  console.log('spend1 fresh');

  // 2. Spend it again: a repeat.
  expect('spend1-again', await spend(c, t1), null);
  console.log('spend1-again repeat');
  const ttl = await c.ttl(t1);
  if (!(ttl > 0 && ttl <= TTL)) fail(`ttl1: got ${ttl}, want 1..${TTL}`);
  console.log(`ttl1 ${ttl}`);

  // 3. A second token whose later check fails: spend, roll back, and it is
  // fresh again.
  const t2 = token();
  expect('spend2', await spend(c, t2), 'OK');
  console.log('spend2 fresh');
  expect('rollback2', await c.del(t2), 1);
  console.log('rollback2 deleted 1');
  expect('spend2-again', await spend(c, t2), 'OK');
  console.log('spend2-again fresh');

  // 4. A pipelined burst, then the same burst again.
  const keys = Array.from({ length: BURST }, token);
  await burst(c, keys, 'OK', 'burst');
  console.log(`burst ${BURST} fresh`);
  await burst(c, keys, null, 'burst-again');
  console.log(`burst-again ${BURST} repeat`);

  // The same over RESP3 (the client says HELLO 3).
  const c3 = await connect(3);
  const keys3 = Array.from({ length: BURST }, token);
  await burst(c3, keys3, 'OK', 'resp3-burst');
  console.log(`resp3-burst ${BURST} fresh`);
  await burst(c3, keys3, null, 'resp3-burst-again');
  console.log(`resp3-burst-again ${BURST} repeat`);
  c3.destroy();

  // 5. Once the first token's rollback window (half the 2 s lease) has
  // closed, it is a complete record: GET gives its value and DEL is refused
  // with NOT_PENDING.
  await sleep(Math.max(0, spent1 + 1500 - performance.now()));
  const deadline = performance.now() + 10000;
  for (;;) {
    const val = await c.get(t1);
    if (val === '1') break;
    if (val !== null) fail(`get1: got ${JSON.stringify(val)}, want "1" or null while pending`);
    if (performance.now() > deadline) fail(`get1: still pending ${Math.round(performance.now() - spent1)} ms after the spend`);
    await sleep(100);
  }
  console.log(`complete1 get 1 after ${Math.round(performance.now() - spent1)} ms`);
  let n;
  try {
    n = await c.del(t1);
  } catch (e) {
    if (!String(e.message).startsWith('NOT_PENDING')) fail(`del1: got error ${JSON.stringify(e.message)}, want one starting NOT_PENDING`);
    console.log('del1 refused ' + e.message);
  }
  if (n !== undefined) fail(`del1: got ${n}, want a NOT_PENDING error (a complete record is never deleted)`);
  expect('spend1-after-del', await spend(c, t1), null);
  console.log('spend1-after-del repeat');

  c.destroy();
  console.log('done');
}

main().catch((e) => fail(`unexpected: ${e && e.stack ? e.stack : e}`));
