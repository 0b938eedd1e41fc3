"""The relay's token ledger (seed 000, section 2) through redis-py.

Usage: relay.py HOST PORT KEY_ID

Run by TestRESPClients (cmd/spent/resp_clients_test.go) against a spent
whose [resp] maps "tokens:redeemed:" to a refuse namespace with a rollback
window. Prints one line per step and exits non-zero on the first answer
that is not the expected one.
"""

import secrets
import sys
import time

import redis

TTL = 108000  # 30 h: the key epoch (24 h) and the grace window (6 h)
BURST = 200


def fail(msg):
    print("FAIL " + msg, flush=True)
    sys.exit(1)


def expect(step, got, want):
    if got != want:
        fail("%s: got %r, want %r" % (step, got, want))


def main():
    host, port, key_id = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    version = getattr(redis, "__version__", "?")
    print("client redis-py " + version, flush=True)

    def token():
        return "tokens:redeemed:%s:%s" % (key_id, secrets.token_hex(16))

    def spend(r, key):
        return r.set(key, "1", nx=True, ex=TTL)

    r = redis.Redis(host=host, port=port, decode_responses=True, socket_timeout=30)

    # 1. Spend a token: fresh.
    t1 = token()
    expect("spend1", spend(r, t1), True)
    spent1 = time.monotonic()
    print("spend1 fresh", flush=True)

    # 2. Spend it again: a repeat.
    expect("spend1-again", spend(r, t1), None)
    print("spend1-again repeat", flush=True)
    ttl = r.ttl(t1)
    if not 0 < ttl <= TTL:
        fail("ttl1: got %r, want 1..%d" % (ttl, TTL))
    print("ttl1 %d" % ttl, flush=True)

    # 3. A second token whose later check fails: spend, roll back, and it
    # is fresh again.
    t2 = token()
    expect("spend2", spend(r, t2), True)
    print("spend2 fresh", flush=True)
    expect("rollback2", r.delete(t2), 1)
    print("rollback2 deleted 1", flush=True)
    expect("spend2-again", spend(r, t2), True)
    print("spend2-again fresh", flush=True)

    # 4. A pipelined burst (no MULTI: transaction=False), then the same
    # burst again.
    def burst(client, keys, want, step):
        pipe = client.pipeline(transaction=False)
        for k in keys:
            pipe.set(k, "1", nx=True, ex=TTL)
        got = pipe.execute()
        if len(got) != len(keys):
            fail("%s: %d replies for %d commands" % (step, len(got), len(keys)))
        for k, g in zip(keys, got):
            expect("%s %s" % (step, k), g, want)

    keys = [token() for _ in range(BURST)]
    burst(r, keys, True, "burst")
    print("burst %d fresh" % BURST, flush=True)
    burst(r, keys, None, "burst-again")
    print("burst-again %d repeat" % BURST, flush=True)

    # The same burst over RESP3 (HELLO 3), where this redis-py has it.
    try:
        r3 = redis.Redis(host=host, port=port, decode_responses=True, socket_timeout=30, protocol=3)
        r3.ping()
    except TypeError:
        r3 = None
    if r3 is None:
        print("resp3 skipped: redis-py %s has no protocol=3 (it came in 5.0)" % version, flush=True)
    else:
        keys3 = [token() for _ in range(BURST)]
        burst(r3, keys3, True, "resp3-burst")
        print("resp3-burst %d fresh" % BURST, flush=True)
        burst(r3, keys3, None, "resp3-burst-again")
        print("resp3-burst-again %d repeat" % BURST, flush=True)
        r3.close()

    # 5. Once the first token's rollback window (half the 2 s lease) has
    # closed, it is a complete record: GET gives its value and DEL is
    # refused with NOT_PENDING.
    time.sleep(max(0.0, spent1 + 1.5 - time.monotonic()))
    deadline = time.monotonic() + 10
    while True:
        val = r.get(t1)
        if val == "1":
            break
        if val is not None:
            fail("get1: got %r, want '1' or nil while pending" % (val,))
        if time.monotonic() > deadline:
            fail("get1: still pending %.1f s after the spend" % (time.monotonic() - spent1))
        time.sleep(0.1)
    print("complete1 get 1 after %d ms" % ((time.monotonic() - spent1) * 1000), flush=True)
    try:
        n = r.delete(t1)
    except redis.ResponseError as e:
        msg = str(e)
        if not msg.startswith("NOT_PENDING"):
            fail("del1: got error %r, want one starting NOT_PENDING" % msg)
        print("del1 refused " + msg, flush=True)
    else:
        fail("del1: got %r, want a NOT_PENDING error (a complete record is never deleted)" % (n,))
    expect("spend1-after-del", spend(r, t1), None)
    print("spend1-after-del repeat", flush=True)

    r.close()
    print("done", flush=True)


if __name__ == "__main__":
    try:
        main()
    except redis.RedisError as e:
        fail("unexpected %s: %s" % (type(e).__name__, e))
