//! `weft apply` against real redis-servers (one per switch, as SONiC has), with a stand-in for
//! the switch side that answers every P4RT_TABLE key the way the plugin does (the real plugin
//! and BMv2 are exercised by the end-to-end tests). Proves: entries land in APPL_DB in SONiC's
//! format with CONFIG_DB rows, every key is answered, a second apply writes nothing, a refused
//! entry is reported by name, and an unreachable switch is reported without stopping the others.

use std::process::Command;
use std::time::Duration;

use weft_sonic_db::{
    ConsumerStateTable, EntryResult, Op, ResponsePublisher, SonicDb, SonicDbId, StatusCode, Table,
};
use weft_sonic_schema::Row;
use weft_sonic_schema::state::{PluginState, PluginStatus};
use weft_tests::redis::RedisServer;

/// Answers every P4RT_TABLE key: SUCCESS, except IPv6 routes when `refuse_v6`.
async fn responder(url: String, refuse_v6: bool) {
    let Ok(sonic) = SonicDb::from_endpoint(&url) else {
        return;
    };
    let Ok(mut consumer) = ConsumerStateTable::new(&sonic, SonicDbId::ApplDb, "P4RT_TABLE").await
    else {
        return;
    };
    consumer.set_poll_interval(Duration::from_millis(20));
    let Ok(mut publisher) = ResponsePublisher::new(&sonic, "P4RT_TABLE").await else {
        return;
    };
    // Like the plugin, say that APPL_STATE_DB is what the switch holds.
    let status = PluginStatus::fresh(PluginState::Running, "stand-in");
    let Ok(conn) = sonic.connect(SonicDbId::StateDb).await else {
        return;
    };
    let Ok(table) = Table::new(conn, PluginStatus::TABLE) else {
        return;
    };
    if table
        .replace(&status.key(), &status.to_fields())
        .await
        .is_err()
    {
        return;
    }
    while let Ok(batch) = consumer.next_batch(1024).await {
        let results: Vec<EntryResult> = batch
            .into_iter()
            .map(|k| {
                if refuse_v6 && k.key.starts_with("FIXED_IPV6_TABLE") {
                    EntryResult::err(
                        k.key,
                        k.op,
                        StatusCode::InvalidParam,
                        "stand-in refuses IPv6",
                        k.fields,
                    )
                } else {
                    EntryResult::ok(k.key, k.op, k.fields)
                }
            })
            .collect();
        if publisher.publish_batch(&results).await.is_err() {
            return;
        }
    }
}

fn intent(dir: &std::path::Path, leaf1: &str, spine1: &str) -> std::path::PathBuf {
    let base = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../topology/examples/leaf-spine-small.yaml"
    ))
    .expect("example");
    let base = base.replace(
        "    p4rt_address: 127.0.0.1:9559\n",
        &format!(
            "    p4rt_address: 127.0.0.1:9559\n    db_socket_dir: {}/nowhere\n",
            dir.display()
        ),
    );
    let text = format!(
        "{base}\nswitches:\n  - name: leaf1\n    db: {leaf1}\n  - name: spine1\n    db: {spine1}\n"
    );
    let p = dir.join("fabric.yaml");
    std::fs::write(&p, text).expect("write intent");
    p
}

fn weft_apply(file: &std::path::Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args([
            "apply",
            &file.to_string_lossy(),
            "--timeout",
            "10s",
            "--retry",
            "1s",
        ])
        .output()
        .expect("run weft");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

fn row<'a>(out: &'a str, switch: &str) -> Vec<&'a str> {
    out.lines()
        .find(|l| l.starts_with(&format!("{switch} ")))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default()
}

#[test]
fn apply_writes_sonic_tables_waits_for_answers_and_a_second_apply_writes_nothing() {
    let r_leaf = RedisServer::start().expect("redis-server (scripts/setup.sh installs it)");
    let r_spine = RedisServer::start().expect("redis-server");
    let dir = std::env::temp_dir().join(format!("weft-apply-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = intent(&dir, &r_leaf.url(), &r_spine.url());

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.spawn(responder(r_leaf.url(), false));
    rt.spawn(responder(r_spine.url(), true));

    let (code, out) = weft_apply(&file);
    // Four switches have no DB: reported, and the exit status says not everything was done.
    assert_eq!(code, 1, "{out}");
    for s in ["leaf2", "leaf3", "leaf4", "spine2"] {
        assert!(
            row(&out, s).contains(&"UNREACHABLE:"),
            "{s} not reported unreachable:\n{out}"
        );
    }
    let leaf1 = row(&out, "leaf1");
    assert_eq!(leaf1.last().copied(), Some("ok"), "{out}");
    let written: usize = leaf1[1].parse().expect("written count");
    assert!(written > 20, "{out}");
    // spine1 refused its IPv6 routes: the failure names the key and the message.
    assert!(row(&out, "spine1").contains(&"FAILED"), "{out}");
    assert!(
        out.contains("SWSS_RC_INVALID_PARAM FIXED_IPV6_TABLE:")
            && out.contains("stand-in refuses IPv6"),
        "{out}"
    );

    // What landed is SONiC's format: APPL_STATE_DB copies, CONFIG_DB QoS rows.
    let applied = r_leaf
        .cli(14, &["KEYS", "P4RT_TABLE:FIXED_IPV4_TABLE:*"])
        .expect("cli");
    assert!(
        applied
            .lines()
            .any(|l| l.contains("{\"match/ipv4_dst\":\"10.0.0.2/32\"}")),
        "{applied}"
    );
    let qos = r_leaf
        .cli(4, &["HGETALL", "PORT_QOS_MAP|Ethernet0"])
        .expect("cli");
    assert!(qos.contains("pfc_enable") && qos.contains('3'), "{qos}");
    let port = r_leaf
        .cli(4, &["HGET", "PORT|Ethernet8", "id"])
        .expect("cli");
    assert_eq!(port.trim(), "3");

    // Again: leaf1 has nothing to write.
    let (_, out2) = weft_apply(&file);
    let leaf1 = row(&out2, "leaf1");
    assert_eq!(
        (leaf1[1], leaf1[2]),
        ("0", "0"),
        "second apply wrote something:\n{out2}"
    );

    // A change on the switch side (an entry lost) is put back, and only it.
    rt.block_on(async {
        let sonic = SonicDb::from_endpoint(&r_leaf.url()).expect("db");
        let t = Table::new(
            sonic.connect(SonicDbId::ApplStateDb).await.expect("conn"),
            "P4RT_TABLE",
        )
        .expect("table");
        t.del("FIXED_IPV4_TABLE:{\"match/ipv4_dst\":\"10.0.0.2/32\"}")
            .await
            .expect("del");
    });
    let (_, out3) = weft_apply(&file);
    assert_eq!(row(&out3, "leaf1")[1], "1", "{out3}");
    drop(rt);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = Op::Set;
}
