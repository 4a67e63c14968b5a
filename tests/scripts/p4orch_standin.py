#!/usr/bin/env python3
"""A stand-in for SONiC's p4orch, the P4RT_TABLE consumer in orchagent, doing only what the
protocol asks of it, written from sonic-swss-common and sonic-swss (no Weft code):

* Redis transport: swss-common's ConsumerStateTable pops (what
  common/consumer_state_table_pops.lua does, below), woken by P4RT_TABLE_CHANNEL@0; every key answered on
  APPL_DB_P4RT_TABLE_RESPONSE_CHANNEL as NotificationProducer sends it: JSON
  [status, key, "err_str", message, field, value, ...] (orchagent/response_publisher.cpp).
* ZMQ transport (--zmq ENDPOINT): a ZMQ_REP socket (common/zmqserver.cpp, one-to-one sync), each
  message in common/binaryserializer.h framing (size_t pair count, then length-prefixed
  strings: (db, table), then per entry (key, field count) and its field pairs; 0 fields is a
  DEL); one reply per message in the same framing, per key (status, message) then its fields.
  No Redis notification (the reply replaces it) and no write of the request into APPL_DB
  (p4orch's ZmqConsumer has dbPersistence=false: the producer writes it behind).
* The applied state written back to APPL_DB P4RT_TABLE, as p4orch does since sonic-swss#3066:
  a successful SET replaces the row (fields, or NULL/NULL), a successful DEL deletes it; a
  failed key's row is left alone.
* Nothing is done before APPL_DB PORT_TABLE:PortInitDone exists (p4orch returns early until
  gPortsOrch->allPortsReady()).
* A key whose table has no manager is refused SWSS_RC_INVALID_PARAM "[OrchAgent] Failed to find
  P4Orch Manager for key K"; over ZMQ every later key of that batch is then SWSS_RC_NOT_EXECUTED
  (P4Orch::doTask's ZMQ path), over Redis only that key fails (P4Orch::enqueue).

Tables with a manager: FIXED_* and EXT_* (p4orch's fixed managers and its extension-table
manager), less those named with --refuse-table (to exercise the failure path).

Usage: p4orch_standin.py --redis /path/redis.sock [--db-base N] [--zmq ipc:///path]
                         [--refuse-table FIXED_X_TABLE] [--batch 1024]
Prints "ready" once serving; runs until killed.
"""

import argparse
import json
import struct
import sys
import time

import redis
import zmq

APPL_DB, STATE_DB = 0, 6
TABLE = "P4RT_TABLE"
RESPONSE_CHANNEL = "APPL_DB_P4RT_TABLE_RESPONSE_CHANNEL"
NULL = "NULL"

# ConsumerStateTable::pops, atomically: take up to N keys from the key set; a key also in the
# delete set has its table row deleted first; the fields the producer left under the temporary
# `_P4RT_TABLE:key` hash are merged into the table row and returned (none: a DEL), and the
# temporary hash goes.
POPS = """
local out = {}
local popped = redis.call('SPOP', KEYS[1], ARGV[1])
for _, key in ipairs(popped) do
  if redis.call('SREM', KEYS[3], key) == 1 then
    redis.call('DEL', KEYS[2] .. key)
  end
  local temp = ARGV[2] .. KEYS[2] .. key
  local fv = redis.call('HGETALL', temp)
  for j = 1, #fv, 2 do
    redis.call('HSET', KEYS[2] .. key, fv[j], fv[j + 1])
  end
  redis.call('DEL', temp)
  out[#out + 1] = {key, fv}
end
return out
"""


def has_manager(key, refused):
    table = key.split(":", 1)[0]
    if table in refused:
        return False
    return table.startswith("FIXED_") or table.startswith("EXT_")


def apply_entry(appl, key, fields, ok):
    """p4orch's write-back to APPL_DB (ResponsePublisher with replace=true) on success."""
    if not ok:
        return
    row = f"{TABLE}:{key}"
    pipe = appl.pipeline(transaction=True)
    pipe.delete(row)
    if fields is not None:
        flat = fields if fields else [(NULL, NULL)]
        pipe.hset(row, mapping=dict(flat))
    pipe.execute()


def answer(key, refused, failed_before, zmq_mode):
    if failed_before and zmq_mode:
        return "SWSS_RC_NOT_EXECUTED", "[OrchAgent] Not executed"
    if not has_manager(key, refused):
        return "SWSS_RC_INVALID_PARAM", f"[OrchAgent] Failed to find P4Orch Manager for key {key}"
    return "SWSS_RC_SUCCESS", ""


def ports_ready(appl):
    return appl.exists("PORT_TABLE:PortInitDone") == 1


# --- binaryserializer.h ---------------------------------------------------------------------


def decode(buf):
    (count,) = struct.unpack_from("<Q", buf, 0)
    off, pairs = 8, []
    for _ in range(count):
        (n,) = struct.unpack_from("<Q", buf, off)
        off += 8
        if off + n > len(buf):
            raise ValueError("serialized key data was truncated")
        k = buf[off : off + n].decode()
        off += n
        (n,) = struct.unpack_from("<Q", buf, off)
        off += 8
        if off + n > len(buf):
            raise ValueError("serialized value data was truncated")
        v = buf[off : off + n].decode()
        off += n
        pairs.append((k, v))
    db, table = pairs[0]
    entries, i = [], 1
    while i < len(pairs):
        key, n = pairs[i][0], int(pairs[i][1])
        fields = pairs[i + 1 : i + 1 + n]
        i += 1 + n
        if len(fields) == n:
            entries.append((key, fields if n else None))
    return db, table, entries


def encode(db, table, entries):
    pairs = [(db, table)]
    for key, fields in entries:
        pairs.append((key, str(len(fields))))
        pairs.extend(fields)
    out = [struct.pack("<Q", len(pairs))]
    for k, v in pairs:
        for s in (k.encode(), v.encode()):
            out.append(struct.pack("<Q", len(s)))
            out.append(s)
    return b"".join(out)


# --- the two transports ---------------------------------------------------------------------


def serve_redis(appl, refused, batch, channel=RESPONSE_CHANNEL):
    pops = appl.register_script(POPS)
    sub = appl.pubsub(ignore_subscribe_messages=True)
    sub.subscribe(f"{TABLE}_CHANNEL@{appl.connection_pool.connection_kwargs.get('db', 0)}")
    while True:
        sub.get_message(timeout=0.05)
        if not ports_ready(appl):
            continue
        while True:
            popped = pops(
                keys=[f"{TABLE}_KEY_SET", f"{TABLE}:", f"{TABLE}_DEL_SET"], args=[batch, "_"]
            )
            if not popped:
                break
            for key, flat in popped:
                key = key.decode()
                fields = [(flat[j].decode(), flat[j + 1].decode()) for j in range(0, len(flat), 2)]
                status, message = answer(key, refused, False, False)
                ok = status == "SWSS_RC_SUCCESS"
                apply_entry(appl, key, fields if fields else None, ok)
                note = [status, key, "err_str", message]
                for f, v in fields:
                    note.extend([f, v])
                appl.publish(channel, json.dumps(note, separators=(",", ":")))


def serve_zmq(appl, endpoint, refused):
    ctx = zmq.Context()
    sock = ctx.socket(zmq.REP)
    sock.bind(endpoint)
    print("ready", flush=True)
    while True:
        msg = sock.recv()
        while not ports_ready(appl):
            time.sleep(0.05)
        try:
            db, table, entries = decode(msg)
        except (ValueError, struct.error, IndexError, UnicodeDecodeError) as e:
            # swss-common's server drops what it cannot read; a REP socket must still answer.
            sock.send(encode("", "", [("", [("SWSS_RC_INVALID_PARAM", str(e))])]))
            continue
        replies, failed = [], False
        for key, fields in entries:
            status, message = answer(key, refused, failed, True)
            ok = status == "SWSS_RC_SUCCESS"
            failed = failed or not ok
            apply_entry(appl, key, fields, ok)
            replies.append((key, [(status, message)] + (fields or [])))
        sock.send(encode(db, table, replies))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis", required=True, help="redis-server unix socket")
    ap.add_argument("--db-base", type=int, default=0)
    ap.add_argument("--zmq", help="ZMQ endpoint to bind (request/reply)")
    ap.add_argument("--refuse-table", action="append", default=[])
    ap.add_argument("--batch", type=int, default=1024)
    a = ap.parse_args()
    appl = redis.Redis(unix_socket_path=a.redis, db=a.db_base + APPL_DB)
    appl.ping()
    refused = set(a.refuse_table)
    if a.zmq:
        serve_zmq(appl, a.zmq, refused)
    else:
        print("ready", flush=True)
        # Switches sharing a redis-server by db_base answer on channels of their own (Weft's
        # convention; SONiC runs one server per switch, db_base 0).
        channel = RESPONSE_CHANNEL + (f"@{a.db_base}" if a.db_base else "")
        serve_redis(appl, refused, a.batch, channel)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
