//! Integration tests against a real redis-server (Debian package) on a private unix socket.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt;
use weft_sonic_db::{
    ConsumerStateTable, EntryResult, KeyOpFieldValues, Op, P4rtAction, P4rtEntry, P4rtKey,
    ProducerStateTable, Response, ResponsePublisher, ResponseWaiter, SonicDb, SonicDbConfig,
    SonicDbError, SonicDbId, StatusCode, SubscriberOptions, SubscriberStateTable, Table,
};
use weft_tests::redis::{RedisServer, RedisServerOptions};

/// Generous: the machine is shared with long builds.
const DEADLINE: Duration = Duration::from_secs(15);

fn server() -> RedisServer {
    match RedisServer::start() {
        Ok(s) => s,
        Err(e) => panic!("cannot start redis-server for this test: {e}"),
    }
}

fn sonic(server: &RedisServer) -> SonicDb {
    SonicDb::from_endpoint(&server.url()).expect("endpoint")
}

async fn raw(db: &SonicDb, id: SonicDbId) -> redis::aio::MultiplexedConnection {
    db.connect(id).await.expect("connect").raw().clone()
}

async fn smembers(c: &mut redis::aio::MultiplexedConnection, key: &str) -> BTreeSet<String> {
    redis::cmd("SMEMBERS")
        .arg(key)
        .query_async(c)
        .await
        .expect("SMEMBERS")
}

async fn hgetall(c: &mut redis::aio::MultiplexedConnection, key: &str) -> BTreeMap<String, String> {
    redis::cmd("HGETALL")
        .arg(key)
        .query_async(c)
        .await
        .expect("HGETALL")
}

async fn exists(c: &mut redis::aio::MultiplexedConnection, key: &str) -> bool {
    let n: i64 = redis::cmd("EXISTS")
        .arg(key)
        .query_async(c)
        .await
        .expect("EXISTS");
    n == 1
}

async fn publish(c: &mut redis::aio::MultiplexedConnection, channel: &str, msg: &str) {
    let _: i64 = redis::cmd("PUBLISH")
        .arg(channel)
        .arg(msg)
        .query_async(c)
        .await
        .expect("PUBLISH");
}

async fn next_payload(ps: &mut redis::aio::PubSub) -> String {
    let msg = tokio::time::timeout(DEADLINE, ps.on_message().next())
        .await
        .expect("no message before the deadline")
        .expect("subscription closed");
    msg.get_payload().expect("string payload")
}

fn route_key(i: u32) -> P4rtKey {
    P4rtKey::new("FIXED_IPV4_TABLE")
        .with_match("ipv4_dst", format!("10.{}.{}.0/24", i / 256, i % 256))
        .with_match("vrf_id", "default")
}

#[tokio::test]
async fn producer_writes_swss_key_layout_and_publishes_only_when_key_becomes_pending() {
    let srv = server();
    let db = sonic(&srv);
    let mut c = raw(&db, SonicDbId::ApplDb).await;
    let mut ps = db.pubsub().await.expect("pubsub");
    ps.subscribe("P4RT_TABLE_CHANNEL@0").await.expect("sub");
    let mut producer = ProducerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("producer");
    let key = route_key(1).to_table_key();

    producer
        .set(
            &key,
            &[("action", "set_nexthop_id"), ("param/nexthop_id", "nh-1")],
        )
        .await
        .expect("set");
    assert_eq!(
        smembers(&mut c, "P4RT_TABLE_KEY_SET").await,
        BTreeSet::from([key.clone()])
    );
    assert_eq!(
        hgetall(&mut c, &format!("_P4RT_TABLE:{key}")).await,
        BTreeMap::from([
            ("action".to_string(), "set_nexthop_id".to_string()),
            ("param/nexthop_id".to_string(), "nh-1".to_string()),
        ])
    );
    assert!(
        !exists(&mut c, &format!("P4RT_TABLE:{key}")).await,
        "producer wrote the live hash"
    );
    assert!(smembers(&mut c, "P4RT_TABLE_DEL_SET").await.is_empty());
    assert_eq!(next_payload(&mut ps).await, "G");

    // Key already pending: a second set must not publish. Redis runs commands in order, so if the
    // producer had published, its "G" would arrive before this marker.
    producer
        .set(&key, &[("param/nexthop_id", "nh-2")])
        .await
        .expect("set again");
    publish(&mut c, "P4RT_TABLE_CHANNEL@0", "MARK-1").await;
    assert_eq!(next_payload(&mut ps).await, "MARK-1");
    assert_eq!(
        hgetall(&mut c, &format!("_P4RT_TABLE:{key}")).await["param/nexthop_id"],
        "nh-2"
    );

    // Delete while pending: staged hash gone, key in DEL_SET, still no publish.
    producer.del(&key).await.expect("del");
    assert!(!exists(&mut c, &format!("_P4RT_TABLE:{key}")).await);
    assert_eq!(
        smembers(&mut c, "P4RT_TABLE_DEL_SET").await,
        BTreeSet::from([key.clone()])
    );
    assert_eq!(
        smembers(&mut c, "P4RT_TABLE_KEY_SET").await,
        BTreeSet::from([key.clone()])
    );
    publish(&mut c, "P4RT_TABLE_CHANNEL@0", "MARK-2").await;
    assert_eq!(next_payload(&mut ps).await, "MARK-2");

    // A batch with one new key publishes exactly once.
    let ops: Vec<KeyOpFieldValues> = (2..5)
        .map(|i| KeyOpFieldValues::set(route_key(i).to_table_key(), [("action", "drop")]))
        .collect();
    producer.apply(&ops).await.expect("batch");
    assert_eq!(next_payload(&mut ps).await, "G");
    publish(&mut c, "P4RT_TABLE_CHANNEL@0", "MARK-3").await;
    assert_eq!(next_payload(&mut ps).await, "MARK-3");
    assert_eq!(producer.pending().await.expect("pending"), 4);
}

#[tokio::test]
async fn producer_uses_state_db_separator_and_refuses_ambiguous_writes() {
    let srv = server();
    let db = sonic(&srv);
    let mut c = raw(&db, SonicDbId::StateDb).await;
    let mut producer = ProducerStateTable::new(&db, SonicDbId::StateDb, "SOME_TABLE")
        .await
        .expect("producer");
    producer.set("k1", &[("f", "v")]).await.expect("set");
    assert!(exists(&mut c, "_SOME_TABLE|k1").await);
    let no_fields: &[(&str, &str)] = &[];
    let err = producer
        .set("k2", no_fields)
        .await
        .expect_err("set without fields");
    assert!(matches!(err, SonicDbError::InvalidKey { .. }), "{err:?}");
    assert!(
        producer.set("", &[("f", "v")]).await.is_err(),
        "empty key accepted"
    );
    assert_eq!(producer.names().channel, "SOME_TABLE_CHANNEL@6");
}

#[tokio::test]
async fn consumer_pop_moves_staged_fields_into_live_table_and_deletes_live_hash_on_del() {
    let srv = server();
    let db = sonic(&srv);
    let mut c = raw(&db, SonicDbId::ApplDb).await;
    let mut producer = ProducerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("producer");
    let mut consumer = ConsumerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("consumer");
    let key = route_key(7).to_table_key();
    let live = format!("P4RT_TABLE:{key}");

    producer
        .set(&key, &[("a", "1"), ("b", "2")])
        .await
        .expect("set");
    let got = consumer.pop(128).await.expect("pop");
    assert_eq!(
        got,
        vec![KeyOpFieldValues::set(&key, [("a", "1"), ("b", "2")])]
    );
    assert_eq!(hgetall(&mut c, &live).await.len(), 2);
    assert!(!exists(&mut c, &format!("_P4RT_TABLE:{key}")).await);
    assert!(consumer.pop(128).await.expect("empty pop").is_empty());

    // A set without a delete merges into the live hash; only the staged fields are reported.
    producer.set(&key, &[("c", "3")]).await.expect("set c");
    assert_eq!(
        consumer.pop(128).await.expect("pop"),
        vec![KeyOpFieldValues::set(&key, [("c", "3")])]
    );
    assert_eq!(hgetall(&mut c, &live).await.len(), 3);

    // Delete then set before the pop: one SET with the new fields, old fields gone.
    producer.del(&key).await.expect("del");
    producer.set(&key, &[("d", "4")]).await.expect("set d");
    assert_eq!(
        consumer.pop(128).await.expect("pop"),
        vec![KeyOpFieldValues::set(&key, [("d", "4")])]
    );
    assert_eq!(
        hgetall(&mut c, &live).await,
        BTreeMap::from([("d".to_string(), "4".to_string())])
    );

    // The live hash stays until the consumer pops the delete.
    producer.del(&key).await.expect("del");
    assert!(
        exists(&mut c, &live).await,
        "producer removed the live hash itself"
    );
    assert_eq!(
        consumer.pop(128).await.expect("pop"),
        vec![KeyOpFieldValues::del(&key)]
    );
    assert!(!exists(&mut c, &live).await);
    assert!(smembers(&mut c, "P4RT_TABLE_DEL_SET").await.is_empty());

    // Set then delete before the pop: a DEL.
    producer.set(&key, &[("e", "5")]).await.expect("set");
    producer.del(&key).await.expect("del");
    assert_eq!(
        consumer.pop(128).await.expect("pop"),
        vec![KeyOpFieldValues::del(&key)]
    );
}

#[tokio::test]
async fn consumer_pops_large_batches_completely_in_bounded_scripts() {
    let srv = server();
    let db = sonic(&srv);
    let mut producer = ProducerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("producer");
    let mut consumer = ConsumerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("consumer");
    let entries: Vec<P4rtEntry> = (0..3000)
        .map(|i| {
            P4rtEntry::new(
                route_key(i),
                P4rtAction::new("set_nexthop_id").with_param("nexthop_id", format!("nh-{}", i % 7)),
            )
        })
        .collect();
    let ops: Vec<KeyOpFieldValues> = entries.iter().map(P4rtEntry::to_set_op).collect();
    producer.apply(&ops).await.expect("apply");
    assert_eq!(consumer.pending().await.expect("pending"), 3000);

    let first = consumer.pop(2500).await.expect("pop");
    assert_eq!(first.len(), 2500, "pop across the 1024-key script bound");
    let rest = consumer.pop(2500).await.expect("pop rest");
    assert_eq!(rest.len(), 500);
    let mut got: Vec<P4rtEntry> = first
        .iter()
        .chain(&rest)
        .map(|op| P4rtEntry::from_set_op(op).expect("entry parses"))
        .collect();
    got.sort_by(|a, b| a.key.cmp(&b.key));
    let mut want = entries;
    want.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(got, want);
}

#[tokio::test]
async fn consumer_wakes_on_publish_without_waiting_for_its_poll() {
    let srv = server();
    let db = sonic(&srv);
    let mut consumer = ConsumerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("consumer");
    // Far longer than the deadline: only the wake-up can end the wait in time.
    consumer.set_poll_interval(Duration::from_secs(3600));
    let waiter = tokio::spawn(async move {
        let r = consumer.next_batch(100).await;
        (consumer, r)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut producer = ProducerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("producer");
    producer
        .set("FIXED_T:{}", &[("action", "drop")])
        .await
        .expect("set");
    let (_, got) = tokio::time::timeout(DEADLINE, waiter)
        .await
        .expect("consumer did not wake on PUBLISH")
        .expect("task");
    assert_eq!(
        got.expect("batch"),
        vec![KeyOpFieldValues::set("FIXED_T:{}", [("action", "drop")])]
    );
}

/// Two switches' DBs in one redis-server, told apart by `?db_base=`: each consumer sees only its
/// own switch's entries and wakes only on its own switch's channel.
#[tokio::test]
async fn switches_sharing_a_server_by_db_base_never_see_each_others_tables() {
    let srv = match RedisServer::start_with(RedisServerOptions {
        databases: 48,
        ..Default::default()
    }) {
        Ok(s) => s,
        Err(e) => panic!("cannot start redis-server for this test: {e}"),
    };
    let a = SonicDb::from_endpoint(&srv.url()).expect("endpoint a");
    let b = SonicDb::from_endpoint(&format!("{}?db_base=32", srv.url())).expect("endpoint b");
    assert_eq!(b.db_number(SonicDbId::ApplDb), 32);
    assert_eq!(
        b.connect(SonicDbId::StateDb).await.expect("state").number(),
        38
    );
    let mut ca = ConsumerStateTable::new(&a, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("consumer a");
    let mut cb = ConsumerStateTable::new(&b, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("consumer b");
    // Only b's publish may wake b in time.
    cb.set_poll_interval(Duration::from_secs(3600));
    let mut pb = ProducerStateTable::new(&b, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("producer b");
    let waiter = tokio::spawn(async move {
        let r = cb.next_batch(100).await;
        (cb, r)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    pb.set("FIXED_T:{}", &[("action", "drop")])
        .await
        .expect("set b");
    let (_, got) = tokio::time::timeout(DEADLINE, waiter)
        .await
        .expect("b's consumer did not wake on b's PUBLISH")
        .expect("task");
    assert_eq!(
        got.expect("batch"),
        vec![KeyOpFieldValues::set("FIXED_T:{}", [("action", "drop")])]
    );
    let mut pa = ProducerStateTable::new(&a, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("producer a");
    assert_eq!(
        pa.pending().await.expect("pending a"),
        0,
        "b's write reached a"
    );
    pa.set("FIXED_T:{}", &[("action", "forward")])
        .await
        .expect("set a");
    let got = tokio::time::timeout(DEADLINE, ca.next_batch(100))
        .await
        .expect("a's consumer")
        .expect("batch a");
    assert_eq!(
        got,
        vec![KeyOpFieldValues::set("FIXED_T:{}", [("action", "forward")])]
    );
    let mut rb = raw(&b, SonicDbId::ApplDb).await;
    assert_eq!(
        hgetall(&mut rb, "P4RT_TABLE:FIXED_T:{}").await["action"],
        "drop",
        "a's write reached b"
    );
    assert!(SonicDb::from_endpoint(&format!("{}?db_base=17", srv.url())).is_err());
}

/// The scripted dump reads what a Table dump reads, for several tables at once, over many pages,
/// and leaves out other tables (also ones whose name starts alike) and keys that are no hashes.
#[tokio::test]
async fn dump_tables_reads_exactly_each_tables_hashes_in_pages() {
    let srv = server();
    let db = sonic(&srv);
    let mut conn = db.connect(SonicDbId::ConfigDb).await.expect("config");
    let mut c = conn.raw().clone();
    for i in 0..2500 {
        let _: () = redis::cmd("HSET")
            .arg(format!("PORT|Ethernet{i}"))
            .arg("speed")
            .arg("100000")
            .arg("mtu")
            .arg(i.to_string())
            .query_async(&mut c)
            .await
            .expect("hset");
    }
    for (k, f) in [
        ("PORT_QOS_MAP|Ethernet0", "pfc_enable"),
        ("QUEUE|Ethernet0|3", "wred_profile"),
        ("BUFFER_PG|Ethernet0|3", "profile"),
    ] {
        let _: () = redis::cmd("HSET")
            .arg(k)
            .arg(f)
            .arg("x")
            .query_async(&mut c)
            .await
            .expect("hset");
    }
    let port = Table::new(conn.clone(), "PORT").expect("table");
    let mut want = port.dump().await.expect("table dump");
    let _: () = redis::cmd("SET")
        .arg("PORT|not-a-hash")
        .arg("v")
        .query_async(&mut c)
        .await
        .expect("set");
    let got = weft_sonic_db::dump_tables(&conn, &["PORT", "QUEUE", "WRED_PROFILE"])
        .await
        .expect("dump");
    assert_eq!(got["PORT"].len(), 2500);
    let mut got_port = got["PORT"].clone();
    for v in got_port.values_mut().chain(want.values_mut()) {
        v.sort();
    }
    assert_eq!(got_port, want);
    assert_eq!(got["QUEUE"].keys().collect::<Vec<_>>(), vec!["Ethernet0|3"]);
    assert!(got["WRED_PROFILE"].is_empty());
    assert!(!got.contains_key("PORT_QOS_MAP"));
    let one = weft_sonic_db::dump_tables(&conn, &["QUEUE"])
        .await
        .expect("one table");
    assert_eq!(one["QUEUE"], got["QUEUE"]);
}

#[tokio::test]
async fn consumer_poll_finds_keys_staged_without_a_publish() {
    let srv = server();
    let db = sonic(&srv);
    let mut consumer = ConsumerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("consumer");
    consumer.set_poll_interval(Duration::from_millis(50));
    // What a producer leaves when its key was already pending: no PUBLISH.
    srv.cli(0, &["SADD", "P4RT_TABLE_KEY_SET", "FIXED_T:{}"])
        .expect("cli");
    srv.cli(0, &["HSET", "_P4RT_TABLE:FIXED_T:{}", "action", "drop"])
        .expect("cli");
    let got = tokio::time::timeout(DEADLINE, consumer.next_batch(10))
        .await
        .expect("poll did not find the key")
        .expect("batch");
    assert_eq!(
        got,
        vec![KeyOpFieldValues::set("FIXED_T:{}", [("action", "drop")])]
    );
}

#[tokio::test]
async fn entry_written_by_hand_like_swss_common_is_consumed() {
    let srv = server();
    let db = sonic(&srv);
    let mut consumer = ConsumerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("consumer");
    consumer.set_poll_interval(Duration::from_secs(3600));
    let key = r#"FIXED_WCMP_GROUP_TABLE:{"match/wcmp_group_id":"group-1"}"#;
    let actions = r#"[{"action":"set_nexthop_id","param/nexthop_id":"nh-1","watch_port":"Ethernet1","weight":2},{"action":"set_nexthop_id","param/nexthop_id":"nh-2","weight":1}]"#;
    // The commands swss-common's producer runs (FACTS.md), issued one by one with redis-cli.
    srv.cli(0, &["SADD", "P4RT_TABLE_KEY_SET", key])
        .expect("SADD");
    srv.cli(
        0,
        &[
            "HSET",
            &format!("_P4RT_TABLE:{key}"),
            "actions",
            actions,
            "controller_metadata",
            "sonic",
        ],
    )
    .expect("HSET");
    srv.cli(0, &["PUBLISH", "P4RT_TABLE_CHANNEL@0", "G"])
        .expect("PUBLISH");

    let got = tokio::time::timeout(DEADLINE, consumer.next_batch(10))
        .await
        .expect("not consumed")
        .expect("batch");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].op, Op::Set);
    let entry = P4rtEntry::from_set_op(&got[0]).expect("entry parses");
    assert_eq!(entry.key.table, "FIXED_WCMP_GROUP_TABLE");
    assert_eq!(entry.key.match_value("wcmp_group_id"), Some("group-1"));
    assert_eq!(entry.controller_metadata.as_deref(), Some("sonic"));
    match &entry.action {
        weft_sonic_db::P4rtActionSpec::Weighted(members) => {
            assert_eq!(members.len(), 2);
            assert_eq!(members[0].weight, 2);
            assert_eq!(members[0].watch_port.as_deref(), Some("Ethernet1"));
            assert_eq!(members[1].action.params["nexthop_id"], "nh-2");
        }
        other => panic!("expected a weighted entry, got {other:?}"),
    }
    // The live entry is where SONiC tools look for it.
    let live = srv
        .cli(
            0,
            &["HGET", &format!("P4RT_TABLE:{key}"), "controller_metadata"],
        )
        .expect("HGET");
    assert_eq!(live.trim(), "sonic");

    // And a hand-written delete.
    srv.cli(0, &["SADD", "P4RT_TABLE_KEY_SET", key])
        .expect("SADD");
    srv.cli(0, &["SADD", "P4RT_TABLE_DEL_SET", key])
        .expect("SADD");
    srv.cli(0, &["DEL", &format!("_P4RT_TABLE:{key}")])
        .expect("DEL");
    srv.cli(0, &["PUBLISH", "P4RT_TABLE_CHANNEL@0", "G"])
        .expect("PUBLISH");
    let got = tokio::time::timeout(DEADLINE, consumer.next_batch(10))
        .await
        .expect("delete not consumed")
        .expect("batch");
    assert_eq!(got, vec![KeyOpFieldValues::del(key)]);
    let n = srv
        .cli(0, &["EXISTS", &format!("P4RT_TABLE:{key}")])
        .expect("EXISTS");
    assert_eq!(n.trim(), "0");
}

#[tokio::test]
async fn scripts_are_reloaded_after_script_flush() {
    let srv = server();
    let db = sonic(&srv);
    let mut producer = ProducerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("producer");
    let mut consumer = ConsumerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("consumer");
    srv.cli(0, &["SCRIPT", "FLUSH"]).expect("flush");
    producer
        .set("FIXED_T:{}", &[("action", "drop")])
        .await
        .expect("set after flush");
    srv.cli(0, &["SCRIPT", "FLUSH"]).expect("flush");
    assert_eq!(consumer.pop(10).await.expect("pop after flush").len(), 1);
    // The publisher's scripts too (APPL_STATE_DB copy, then the notifications).
    let mut waiter = ResponseWaiter::subscribe(&db, "P4RT_TABLE")
        .await
        .expect("waiter");
    let mut publisher = ResponsePublisher::new(&db, "P4RT_TABLE")
        .await
        .expect("publisher");
    srv.cli(0, &["SCRIPT", "FLUSH"]).expect("flush");
    publisher
        .publish_batch(&[EntryResult::ok(
            "FIXED_T:{}",
            Op::Set,
            vec![("action".into(), "drop".into())],
        )])
        .await
        .expect("publish after flush");
    let out = waiter.wait(["FIXED_T:{}"], DEADLINE).await.expect("wait");
    assert!(out.all_ok(), "{out:?}");
    let mut c = raw(&db, SonicDbId::ApplStateDb).await;
    assert_eq!(
        hgetall(&mut c, "P4RT_TABLE:FIXED_T:{}").await,
        BTreeMap::from([("action".to_string(), "drop".to_string())])
    );
}

#[tokio::test]
async fn a_batch_of_responses_is_one_message_per_key_in_order_and_a_set_without_fields_stores_null()
{
    let srv = server();
    let db = sonic(&srv);
    let mut raw_sub = db.pubsub().await.expect("pubsub");
    raw_sub
        .subscribe("APPL_DB_P4RT_TABLE_RESPONSE_CHANNEL")
        .await
        .expect("sub");
    let mut publisher = ResponsePublisher::new(&db, "P4RT_TABLE")
        .await
        .expect("publisher");
    let keys: Vec<String> = (0..300).map(|i| route_key(i).to_table_key()).collect();
    let mut results: Vec<EntryResult> = keys
        .iter()
        .map(|k| EntryResult::ok(k, Op::Set, vec![("action".into(), "drop".into())]))
        .collect();
    results[7] = EntryResult::ok(&keys[7], Op::Set, vec![]);
    results[8] = EntryResult::err(
        &keys[8],
        Op::Set,
        StatusCode::Full,
        "table full",
        vec![("action".into(), "drop".into())],
    );
    publisher.publish_batch(&results).await.expect("publish");
    for r in &results {
        let got = Response::parse(&next_payload(&mut raw_sub).await).expect("swss message");
        assert_eq!((&got.key, got.status), (&r.key, r.status));
        assert_eq!(got.fields, r.fields);
    }
    let mut c = raw(&db, SonicDbId::ApplStateDb).await;
    assert_eq!(
        hgetall(&mut c, &format!("P4RT_TABLE:{}", keys[7])).await,
        BTreeMap::from([("NULL".to_string(), "NULL".to_string())]),
        "swss-common's placeholder for a row without fields"
    );
    assert!(!exists(&mut c, &format!("P4RT_TABLE:{}", keys[8])).await);
    assert_eq!(
        hgetall(&mut c, &format!("P4RT_TABLE:{}", keys[299])).await,
        BTreeMap::from([("action".to_string(), "drop".to_string())])
    );
}

#[tokio::test]
async fn responses_round_trip_and_successes_are_copied_to_appl_state_db() {
    let srv = server();
    let db = sonic(&srv);
    let mut waiter = ResponseWaiter::subscribe(&db, "P4RT_TABLE")
        .await
        .expect("waiter");
    let mut raw_sub = db.pubsub().await.expect("pubsub");
    raw_sub
        .subscribe("APPL_DB_P4RT_TABLE_RESPONSE_CHANNEL")
        .await
        .expect("sub");
    let mut publisher = ResponsePublisher::new(&db, "P4RT_TABLE")
        .await
        .expect("publisher");
    let state = Table::new(
        db.connect(SonicDbId::ApplStateDb).await.expect("c"),
        "P4RT_TABLE",
    )
    .expect("table");

    let ok_entry = P4rtEntry::new(
        route_key(1),
        P4rtAction::new("set_nexthop_id").with_param("nexthop_id", "nh-1"),
    );
    let k_ok = ok_entry.key.to_table_key();
    let k_bad = route_key(2).to_table_key();
    let k_del = route_key(3).to_table_key();
    let k_never = route_key(4).to_table_key();
    // An entry installed earlier, now deleted successfully.
    state
        .set(&k_del, &[("action", "drop")])
        .await
        .expect("seed");
    // A stale field must not survive a successful modify.
    state.set(&k_ok, &[("param/old", "x")]).await.expect("seed");

    publisher
        .publish_batch(&[
            EntryResult::ok(&k_ok, Op::Set, ok_entry.to_fields()),
            EntryResult::err(
                &k_bad,
                Op::Set,
                StatusCode::InvalidParam,
                "[Weft] unknown action 'bogus'",
                vec![("action".into(), "bogus".into())],
            ),
            EntryResult::ok(&k_del, Op::Del, vec![]),
        ])
        .await
        .expect("publish");

    let out = waiter
        .wait([k_ok.clone(), k_bad.clone(), k_del.clone()], DEADLINE)
        .await
        .expect("wait");
    assert!(out.missing.is_empty(), "{out:?}");
    assert_eq!(out.responses[&k_ok].status, StatusCode::Success);
    assert_eq!(out.responses[&k_ok].message, "");
    assert_eq!(out.responses[&k_bad].status, StatusCode::InvalidParam);
    assert_eq!(
        out.responses[&k_bad].message,
        "[Weft] unknown action 'bogus'"
    );
    assert_eq!(out.responses[&k_del].status, StatusCode::Success);
    assert!(!out.all_ok());
    assert_eq!(out.failures().count(), 1);
    // A key nobody answers is reported missing after the timeout, not an error.
    let out = waiter
        .wait([k_never.clone(), k_ok.clone()], Duration::from_millis(200))
        .await
        .expect("wait");
    assert_eq!(out.missing, BTreeSet::from([k_never.clone(), k_ok.clone()]));
    assert!(!out.all_ok());

    // Wire format, exactly: [status, key, "err_str", message, fields...].
    let first = next_payload(&mut raw_sub).await;
    let want: Vec<String> = vec![
        "SWSS_RC_SUCCESS".into(),
        k_ok.clone(),
        "err_str".into(),
        "".into(),
        "action".into(),
        "set_nexthop_id".into(),
        "param/nexthop_id".into(),
        "nh-1".into(),
    ];
    assert_eq!(first, serde_json::to_string(&want).expect("json"));

    let stored = state
        .get(&k_ok)
        .await
        .expect("get")
        .expect("copied to APPL_STATE_DB");
    assert_eq!(
        P4rtEntry::from_fields(ok_entry.key.clone(), &stored).expect("parse"),
        ok_entry
    );
    assert_eq!(
        state.get(&k_bad).await.expect("get"),
        None,
        "failed entry copied"
    );
    assert_eq!(
        state.get(&k_del).await.expect("get"),
        None,
        "deleted entry kept"
    );
    let mut c = raw(&db, SonicDbId::ApplStateDb).await;
    assert!(exists(&mut c, &format!("P4RT_TABLE:{k_ok}")).await);

    // What the controller diffs against: the installed entries, parsed; foreign keys reported.
    state
        .set("not a p4rt key", &[("x", "y")])
        .await
        .expect("seed");
    let snapshot = state.read_p4rt().await.expect("read");
    assert_eq!(snapshot.entries.len(), 1);
    assert_eq!(snapshot.entries[&ok_entry.key], ok_entry);
    assert_eq!(snapshot.malformed.len(), 1);
    assert_eq!(snapshot.malformed[0].0, "not a p4rt key");
}

#[tokio::test]
async fn responses_arriving_before_wait_are_kept_for_it() {
    let srv = server();
    let db = sonic(&srv);
    let mut waiter = ResponseWaiter::subscribe(&db, "P4RT_TABLE")
        .await
        .expect("waiter");
    let mut publisher = ResponsePublisher::new(&db, "P4RT_TABLE")
        .await
        .expect("publisher");
    publisher
        .publish(&EntryResult::ok(
            "FIXED_T:{\"match/a\":\"1\"}",
            Op::Del,
            vec![],
        ))
        .await
        .expect("publish a");
    publisher
        .publish(&EntryResult::ok(
            "FIXED_T:{\"match/a\":\"2\"}",
            Op::Del,
            vec![],
        ))
        .await
        .expect("publish b");
    let out = waiter
        .wait(["FIXED_T:{\"match/a\":\"2\"}"], DEADLINE)
        .await
        .expect("wait b");
    assert!(out.all_ok());
    // "a" was read off the channel while waiting for "b" and is still there for a later wait.
    let out = waiter
        .wait(["FIXED_T:{\"match/a\":\"1\"}"], Duration::from_millis(10))
        .await
        .expect("wait a");
    assert!(out.all_ok(), "{out:?}");
}

#[tokio::test]
async fn subscriber_sees_state_db_port_table_changes_via_keyspace_notifications() {
    let srv = server();
    let db = sonic(&srv);
    let ports = Table::new(
        db.connect(SonicDbId::StateDb).await.expect("c"),
        "PORT_TABLE",
    )
    .expect("table");
    ports
        .set("Ethernet0", &[("oper_status", "up")])
        .await
        .expect("seed");
    assert_eq!(
        srv.cli(0, &["CONFIG", "GET", "notify-keyspace-events"])
            .expect("cli")
            .lines()
            .nth(1),
        Some("")
    );

    let mut sub = SubscriberStateTable::new(
        &db,
        SonicDbId::StateDb,
        "PORT_TABLE",
        SubscriberOptions::default(),
    )
    .await
    .expect("subscriber");
    let flags = srv
        .cli(0, &["CONFIG", "GET", "notify-keyspace-events"])
        .expect("cli");
    assert!(
        flags.contains('K'),
        "keyspace events not enabled: {flags:?}"
    );
    assert_eq!(
        sub.initial_dump().await.expect("dump"),
        vec![KeyOpFieldValues::set("Ethernet0", [("oper_status", "up")])]
    );

    // Another table with a similar name must not leak in.
    srv.cli(6, &["HSET", "PORT_TABLE_X|Ethernet9", "oper_status", "up"])
        .expect("cli");
    ports
        .set("Ethernet4", &[("oper_status", "down"), ("speed", "100000")])
        .await
        .expect("set");
    let ev = tokio::time::timeout(DEADLINE, sub.next())
        .await
        .expect("no event")
        .expect("event");
    assert_eq!(
        ev,
        KeyOpFieldValues::set("Ethernet4", [("oper_status", "down"), ("speed", "100000")])
    );
    ports
        .set("Ethernet4", &[("oper_status", "up")])
        .await
        .expect("set");
    let ev = tokio::time::timeout(DEADLINE, sub.next())
        .await
        .expect("no event")
        .expect("event");
    assert_eq!(ev.op, Op::Set);
    assert_eq!(ev.field("oper_status"), Some("up"));
    assert_eq!(
        ev.field("speed"),
        Some("100000"),
        "subscriber must report the whole entry"
    );
    ports.del("Ethernet0").await.expect("del");
    let ev = tokio::time::timeout(DEADLINE, sub.next())
        .await
        .expect("no event")
        .expect("event");
    assert_eq!(ev, KeyOpFieldValues::del("Ethernet0"));
}

#[tokio::test]
async fn subscriber_refuses_to_start_without_keyspace_events_when_config_set_is_not_allowed() {
    let srv = server();
    let db = sonic(&srv);
    let err = SubscriberStateTable::new(
        &db,
        SonicDbId::StateDb,
        "PORT_TABLE",
        SubscriberOptions {
            allow_config_set: false,
        },
    )
    .await
    .err()
    .expect("must fail");
    assert!(
        matches!(err, SonicDbError::KeyspaceNotificationsDisabled { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("notify-keyspace-events"), "{err}");

    // With SONiC's own setting it starts without touching the config.
    let srv = RedisServer::start_with(RedisServerOptions {
        notify_keyspace_events: Some("AKE".into()),
        ..Default::default()
    })
    .expect("server");
    let db = sonic(&srv);
    SubscriberStateTable::new(
        &db,
        SonicDbId::StateDb,
        "PORT_TABLE",
        SubscriberOptions {
            allow_config_set: false,
        },
    )
    .await
    .expect("subscriber with AKE");
}

#[tokio::test]
async fn table_uses_the_database_separator_and_lists_only_its_own_keys() {
    let srv = server();
    let db = sonic(&srv);
    let queue = Table::new(db.connect(SonicDbId::ConfigDb).await.expect("c"), "QUEUE").expect("t");
    queue
        .set("Ethernet0|3", &[("wred_profile", "AZURE_LOSSLESS")])
        .await
        .expect("set");
    queue
        .set("Ethernet4|3", &[("wred_profile", "AZURE_LOSSLESS")])
        .await
        .expect("set");
    srv.cli(4, &["HSET", "QUEUE_X|Ethernet0", "a", "b"])
        .expect("cli");
    let raw = srv
        .cli(4, &["HGET", "QUEUE|Ethernet0|3", "wred_profile"])
        .expect("cli");
    assert_eq!(raw.trim(), "AZURE_LOSSLESS");
    assert_eq!(
        queue.keys().await.expect("keys"),
        vec!["Ethernet0|3", "Ethernet4|3"]
    );
    assert_eq!(queue.dump().await.expect("dump").len(), 2);
    queue
        .replace("Ethernet0|3", &[("scheduler", "s1")])
        .await
        .expect("replace");
    assert_eq!(
        queue.get("Ethernet0|3").await.expect("get"),
        Some(vec![("scheduler".to_string(), "s1".to_string())])
    );
    queue.del("Ethernet0|3").await.expect("del");
    assert_eq!(queue.get("Ethernet0|3").await.expect("get"), None);
    assert!(!queue.exists("Ethernet0|3").await.expect("exists"));
    assert!(Table::new(db.connect(SonicDbId::ConfigDb).await.expect("c"), "A|B").is_err());
}

#[tokio::test]
async fn redis_down_gives_clear_errors_not_panics() {
    // Nothing listens here.
    let dir = std::env::temp_dir().join(format!("weft-no-redis-{}", std::process::id()));
    let db =
        SonicDb::from_endpoint(&format!("unix://{}/redis.sock", dir.display())).expect("endpoint");
    let err = db.connect(SonicDbId::ApplDb).await.expect_err("no server");
    assert!(matches!(err, SonicDbError::Connect { .. }), "{err:?}");
    assert!(err.is_connection_error());
    assert!(
        err.to_string().contains("redis.sock"),
        "error does not name the endpoint: {err}"
    );
    assert!(db.ping().await.is_err());
    let tcp = SonicDb::from_endpoint("redis://127.0.0.1:1").expect("endpoint");
    assert!(
        tcp.connect(SonicDbId::ConfigDb)
            .await
            .expect_err("no server")
            .is_connection_error()
    );

    // A server that dies under live handles.
    let mut srv = server();
    let db = sonic(&srv);
    let mut producer = ProducerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("producer");
    let mut consumer = ConsumerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("consumer");
    let mut waiter = ResponseWaiter::subscribe(&db, "P4RT_TABLE")
        .await
        .expect("waiter");
    srv.stop();
    let err = producer
        .set("FIXED_T:{}", &[("action", "drop")])
        .await
        .expect_err("server gone");
    assert!(err.is_connection_error(), "{err:?}");
    let err = tokio::time::timeout(DEADLINE, consumer.next_batch(10))
        .await
        .expect("consumer hung on a dead server")
        .expect_err("server gone");
    assert!(err.is_connection_error(), "{err:?}");
    let err = waiter.wait(["k"], DEADLINE).await.expect_err("server gone");
    assert!(
        matches!(err, SonicDbError::SubscriptionClosed { .. }),
        "{err:?}"
    );

    // After a restart a fresh handle works again (and finds an empty database).
    srv.restart().expect("restart");
    let mut producer = ProducerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("producer");
    assert_eq!(producer.pending().await.expect("pending"), 0);
}

#[tokio::test]
async fn password_and_acl_user_authenticate() {
    let srv = RedisServer::start_with(RedisServerOptions {
        password: Some("default-secret".into()),
        acl_user: Some(("weft".into(), "weft-secret".into())),
        ..Default::default()
    })
    .expect("server");
    let anonymous = sonic(&srv);
    let err = anonymous.ping().await.expect_err("no credentials");
    assert!(err.to_string().to_lowercase().contains("auth"), "{err}");

    let base = SonicDbConfig::parse(&srv.url()).expect("cfg");
    SonicDb::new(base.clone().with_password("default-secret"))
        .ping()
        .await
        .expect("password");
    SonicDb::new(base.clone().with_user("weft", "weft-secret"))
        .ping()
        .await
        .expect("ACL user");
    let err = SonicDb::new(base.with_user("weft", "wrong"))
        .ping()
        .await
        .expect_err("bad password");
    assert!(matches!(err, SonicDbError::Connect { .. }), "{err:?}");
}

/// swss-common's ConsumerStateTable pop, written out independently of `ConsumerStateTable`
/// (from `consumerstatetable.cpp` / `consumer_state_table_pops.lua`): SPOP keys; per key, a
/// pending delete drops the live row first; staged fields are then merged in (HSET).
const SWSS_POP: &str = r#"
local ret = {}
local keys = redis.call('SPOP', KEYS[1], ARGV[1])
for i = 1, #keys do
    local key = keys[i]
    if redis.call('SREM', KEYS[3], key) == 1 then
        redis.call('DEL', KEYS[4] .. key)
    end
    local fv = redis.call('HGETALL', KEYS[2] .. key)
    for j = 1, #fv, 2 do
        redis.call('HSET', KEYS[4] .. key, fv[j], fv[j + 1])
    end
    redis.call('DEL', KEYS[2] .. key)
    table.insert(ret, {key, fv})
end
return ret
"#;

async fn swss_pop(c: &mut redis::aio::MultiplexedConnection) -> Vec<(String, Vec<String>)> {
    redis::cmd("EVAL")
        .arg(SWSS_POP)
        .arg(4)
        .arg("P4RT_TABLE_KEY_SET")
        .arg("_P4RT_TABLE:")
        .arg("P4RT_TABLE_DEL_SET")
        .arg("P4RT_TABLE:")
        .arg(128)
        .query_async(c)
        .await
        .expect("swss pop")
}

#[tokio::test]
async fn an_action_with_fewer_fields_written_as_replace_leaves_exactly_its_fields_in_the_row() {
    let server = server();
    let db = sonic(&server);
    let mut c = raw(&db, SonicDbId::ApplDb).await;
    let mut prod = ProducerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("producer");
    let key = r#"FIXED_IPV4_TABLE:{"match/ipv4_dst":"10.0.0.0/24"}"#;
    let to_nexthop = KeyOpFieldValues::set(
        key,
        [("action", "set_nexthop_id"), ("param/nexthop_id", "0x1")],
    );
    let to_drop = KeyOpFieldValues::set(key, [("action", "drop_route")]);
    prod.apply(std::slice::from_ref(&to_nexthop))
        .await
        .expect("set");
    swss_pop(&mut c).await;

    // A plain SET merges: the row keeps the old action's parameter (what SONiC's consumers
    // then replay and refuse).
    prod.apply(std::slice::from_ref(&to_drop))
        .await
        .expect("set");
    let popped = swss_pop(&mut c).await;
    assert_eq!(popped[0].1, vec!["action", "drop_route"]);
    let row = hgetall(&mut c, &format!("P4RT_TABLE:{key}")).await;
    assert_eq!(row.get("param/nexthop_id").map(String::as_str), Some("0x1"));

    // Back, then the same change as a replace: the consumer sees a SET with the new fields and
    // the row holds exactly them.
    prod.apply(std::slice::from_ref(&to_nexthop))
        .await
        .expect("set");
    swss_pop(&mut c).await;
    prod.apply_replacing(std::slice::from_ref(&to_drop), &|k| k == key)
        .await
        .expect("replace");
    let popped = swss_pop(&mut c).await;
    assert_eq!(popped.len(), 1, "one operation, not a delete and a set");
    assert_eq!(popped[0].1, vec!["action", "drop_route"]);
    let row = hgetall(&mut c, &format!("P4RT_TABLE:{key}")).await;
    assert_eq!(
        row,
        [("action".to_string(), "drop_route".to_string())].into(),
        "the live row holds exactly the new entry"
    );
    // Our own consumer reads the same.
    prod.apply(std::slice::from_ref(&to_nexthop))
        .await
        .expect("set");
    prod.apply_replacing(std::slice::from_ref(&to_drop), &|k| k == key)
        .await
        .expect("replace");
    let mut cons = ConsumerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("consumer");
    let got = cons.pop(128).await.expect("pop");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].op, Op::Set);
    assert_eq!(
        got[0].fields,
        vec![("action".to_string(), "drop_route".to_string())]
    );
    let row = hgetall(&mut c, &format!("P4RT_TABLE:{key}")).await;
    assert_eq!(row.len(), 1, "{row:?}");
}

/// Fencing: a batch from an older term is refused whole and stages nothing; a newer term's
/// batch raises the DB's term; the layout of a fenced batch is swss-common's.
#[tokio::test]
async fn fenced_batches_from_an_older_term_are_refused_whole() {
    let srv = server();
    let db = sonic(&srv);
    let appl = db.connect(SonicDbId::ApplDb).await.expect("appl");
    let mut c = raw(&db, SonicDbId::ApplDb).await;
    let mut old = ProducerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("producer");
    old.set_fence(Some(7)).await.expect("fence");
    let k1 = route_key(1).to_table_key();
    old.apply(&[KeyOpFieldValues::set(k1.clone(), [("action", "drop")])])
        .await
        .expect("first write of term 7");
    assert_eq!(weft_sonic_db::held_term(&appl).await.expect("term"), 7);
    assert_eq!(
        hgetall(&mut c, &format!("_P4RT_TABLE:{k1}")).await["action"],
        "drop"
    );

    // A new leader (term 9) claims the DB; the old one's next batch is refused, nothing of it
    // is staged, and the term stays 9.
    assert_eq!(weft_sonic_db::claim_term(&appl, 9).await.expect("claim"), 7);
    let ops: Vec<KeyOpFieldValues> = (2..700)
        .map(|i| KeyOpFieldValues::set(route_key(i).to_table_key(), [("action", "drop")]))
        .collect();
    let e = old.apply(&ops).await.expect_err("fenced");
    assert!(
        matches!(e, SonicDbError::Fenced { term: 7, held: 9 }),
        "{e:?}"
    );
    assert_eq!(
        smembers(&mut c, "P4RT_TABLE_KEY_SET").await,
        BTreeSet::from([k1.clone()]),
        "a fenced batch staged keys"
    );
    let e = weft_sonic_db::claim_term(&appl, 8)
        .await
        .expect_err("older claim");
    assert!(
        matches!(e, SonicDbError::Fenced { term: 8, held: 9 }),
        "{e:?}"
    );

    // CONFIG_DB rows are fenced the same way, against CONFIG_DB's own term key.
    let config = db.connect(SonicDbId::ConfigDb).await.expect("config");
    weft_sonic_db::claim_term(&config, 9)
        .await
        .expect("claim config");
    let t = Table::new(config.clone(), "WEFT_TEST").expect("table");
    let rows = vec![("a".to_string(), vec![("f".to_string(), "1".to_string())])];
    let e = t
        .replace_many_fenced(7, &rows, &[])
        .await
        .expect_err("fenced rows");
    assert!(matches!(e, SonicDbError::Fenced { .. }), "{e:?}");
    assert_eq!(t.get("a").await.expect("get"), None);
    t.replace_many_fenced(9, &rows, &[]).await.expect("rows");
    assert_eq!(t.get("a").await.expect("get"), Some(rows[0].1.clone()));
    t.replace_many_fenced(10, &[], &["a".to_string()])
        .await
        .expect("delete");
    assert_eq!(t.get("a").await.expect("get"), None);
    assert_eq!(weft_sonic_db::held_term(&config).await.expect("term"), 10);

    // The new leader writes; unfenced writers (swss-common's protocol) are untouched by it.
    let mut new = ProducerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("producer");
    new.set_fence(Some(9)).await.expect("fence");
    new.apply(&ops[..3]).await.expect("term 9 writes");
    assert_eq!(smembers(&mut c, "P4RT_TABLE_KEY_SET").await.len(), 4);
}

/// The publisher's incremental digest is what a reader of APPL_STATE_DB computes from scratch:
/// after rows it found there, sets, rewrites, a field-less entry (swss-common's NULL
/// placeholder), a delete, and a failure (nothing written).
#[tokio::test]
async fn the_tracked_appl_state_digest_equals_the_digest_of_the_table_read_back() {
    use weft_sonic_db::Digest;
    let srv = server();
    let db = sonic(&srv);
    let state = Table::new(
        db.connect(SonicDbId::ApplStateDb).await.expect("c"),
        "P4RT_TABLE",
    )
    .expect("table");
    let fv = |v: &str| vec![("action".to_string(), v.to_string())];
    state
        .set(&route_key(1).to_table_key(), &[("action", "drop")])
        .await
        .expect("earlier row");
    state
        .set(&route_key(2).to_table_key(), &[("action", "drop")])
        .await
        .expect("earlier row");
    let read_back = || async {
        let rows = state.dump().await.expect("dump");
        Digest::of(rows.iter().map(|(k, f)| (k.as_str(), f)))
    };
    let mut publisher = ResponsePublisher::new(&db, "P4RT_TABLE")
        .await
        .expect("publisher");
    assert_eq!(publisher.digest(), None, "not tracked until asked");
    publisher.track(&state.dump().await.expect("dump"));
    assert_eq!(publisher.digest(), Some(read_back().await));

    let batches = vec![
        vec![
            EntryResult::ok(route_key(3).to_table_key(), Op::Set, fv("set_nexthop_id")),
            EntryResult::ok(route_key(1).to_table_key(), Op::Set, fv("set_nexthop_id")),
        ],
        vec![
            EntryResult::ok(route_key(4).to_table_key(), Op::Set, Vec::new()),
            EntryResult::ok(route_key(2).to_table_key(), Op::Del, Vec::new()),
            EntryResult::err(
                route_key(5).to_table_key(),
                Op::Set,
                StatusCode::InvalidParam,
                "refused",
                fv("x"),
            ),
        ],
    ];
    let mut seen = vec![publisher.digest()];
    for b in &batches {
        publisher.publish_batch(b).await.expect("publish");
        let d = publisher.digest();
        assert_eq!(d, Some(read_back().await), "after {b:?}");
        assert!(!seen.contains(&d), "every batch changed the table");
        seen.push(d);
    }
    assert_eq!(publisher.digest().map(|d| d.count()), Some(3));
}

#[tokio::test]
async fn popped_keys_and_values_survive_quotes_escapes_unicode_and_empty_values() {
    let srv = server();
    let db = sonic(&srv);
    let mut producer = ProducerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("producer");
    let mut consumer = ConsumerStateTable::new(&db, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("consumer");
    let key = r#"FIXED_T:{"match/a":"x\"y\\z/é"}"#;
    let fields = vec![
        ("action".to_string(), "a\tb\\c\"d/e".to_string()),
        ("param/empty".to_string(), String::new()),
        ("param/uni".to_string(), "żółw ✓".to_string()),
    ];
    producer.set(key, &fields).await.expect("set");
    producer.del("FIXED_T:gone").await.expect("del");
    let mut got = consumer.pop(10).await.expect("pop");
    // The set first, then the delete.
    got.sort_by_key(|o| o.op == Op::Del);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0].key, key);
    assert_eq!(got[0].op, Op::Set);
    let mut want = fields.clone();
    want.sort();
    let mut have = got[0].fields.clone();
    have.sort();
    assert_eq!(have, want);
    assert_eq!((got[1].key.as_str(), got[1].op), ("FIXED_T:gone", Op::Del));
    assert!(consumer.pop(10).await.expect("pop").is_empty());
}

/// Two switches' DBs on one redis-server (`?db_base=`), the same route written to both: each
/// waiter takes its own switch's answer for the key, never the other's (Redis channels are
/// server-wide, so a shared channel would hand leaf B's refusal to leaf A as A's answer).
#[tokio::test]
async fn switches_sharing_a_server_by_db_base_each_get_only_their_own_answers() {
    let srv = RedisServer::start_with(RedisServerOptions {
        databases: 48,
        ..Default::default()
    })
    .expect("redis-server with 48 databases");
    let a = SonicDb::from_endpoint(&format!("{}?db_base=16", srv.url())).expect("a");
    let b = SonicDb::from_endpoint(&format!("{}?db_base=32", srv.url())).expect("b");
    let key = route_key(9).to_table_key();
    let mut wait_a = ResponseWaiter::subscribe(&a, "P4RT_TABLE")
        .await
        .expect("waiter a");
    let mut wait_b = ResponseWaiter::subscribe(&b, "P4RT_TABLE")
        .await
        .expect("waiter b");
    let mut pub_a = ResponsePublisher::new(&a, "P4RT_TABLE")
        .await
        .expect("publisher a");
    let mut pub_b = ResponsePublisher::new(&b, "P4RT_TABLE")
        .await
        .expect("publisher b");
    let fields = vec![("action".to_string(), "drop".to_string())];
    // B answers first, and refuses; A's answer comes after and is a success.
    pub_b
        .publish_batch(&[EntryResult::err(
            &key,
            Op::Set,
            StatusCode::Full,
            "table full on b",
            fields.clone(),
        )])
        .await
        .expect("publish b");
    pub_a
        .publish_batch(&[EntryResult::ok(&key, Op::Set, fields.clone())])
        .await
        .expect("publish a");
    let got_a = wait_a.wait([key.clone()], DEADLINE).await.expect("wait a");
    assert!(got_a.all_ok(), "a took b's refusal: {got_a:?}");
    let got_b = wait_b.wait([key.clone()], DEADLINE).await.expect("wait b");
    assert_eq!(got_b.responses[&key].status, StatusCode::Full, "{got_b:?}");
    // Each copy in its own switch's APPL_STATE_DB only.
    let mut state_a = raw(&a, SonicDbId::ApplStateDb).await;
    let mut state_b = raw(&b, SonicDbId::ApplStateDb).await;
    assert!(exists(&mut state_a, &format!("P4RT_TABLE:{key}")).await);
    assert!(!exists(&mut state_b, &format!("P4RT_TABLE:{key}")).await);
}

/// Calls of `cmd` the server has run (`INFO commandstats`).
async fn calls(c: &mut redis::aio::MultiplexedConnection, cmd: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(c)
        .await
        .expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn rows_and_the_hashes_beside_them_are_merged_in_one_transaction() {
    let srv = server();
    let db = sonic(&srv);
    let conn = db.connect(SonicDbId::CountersDb).await.expect("connect");
    let table = Table::new(conn, "COUNTERS").expect("table");
    let mut c = raw(&db, SonicDbId::CountersDb).await;
    let row = |v: &str| vec![("SAI_PORT_STAT_IF_IN_UCAST_PKTS".to_string(), v.to_string())];
    let copy = vec![("poll".to_string(), "packed".to_string())];
    table
        .merge_many(&[("Ethernet0".into(), row("1"))])
        .await
        .expect("merge");
    assert_eq!(
        calls(&mut c, "exec").await,
        0,
        "merge_many is a plain pipeline"
    );
    table
        .merge_many_with(
            &[
                ("Ethernet0".into(), row("2")),
                ("Ethernet4".into(), row("3")),
            ],
            &[("WEFT_COUNTERS_SNAPSHOT", &copy)],
        )
        .await
        .expect("merge with");
    assert_eq!(calls(&mut c, "multi").await, 1);
    assert_eq!(calls(&mut c, "exec").await, 1);
    assert_eq!(
        hgetall(&mut c, "COUNTERS:Ethernet0").await["SAI_PORT_STAT_IF_IN_UCAST_PKTS"],
        "2"
    );
    assert_eq!(
        hgetall(&mut c, "COUNTERS:Ethernet4").await["SAI_PORT_STAT_IF_IN_UCAST_PKTS"],
        "3"
    );
    assert_eq!(
        hgetall(&mut c, "WEFT_COUNTERS_SNAPSHOT").await,
        BTreeMap::from([("poll".to_string(), "packed".to_string())])
    );
}
