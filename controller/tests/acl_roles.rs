//! Least privilege: `weft testbed up --db-only --acl` starts every switch's redis-server with
//! Redis ACL users per role and `default` off, passwords in 0600 files. Proves: without
//! credentials nothing connects; `weft apply` with the controller's file (WEFT_DB_CREDENTIALS)
//! writes; the controller is refused writes of the plugin's keys (APPL_STATE_DB, its STATE_DB
//! tables, COUNTERS_DB) and admin commands; the plugin pops what the controller wrote and
//! answers, but is refused the controller's keys (the producer's, CONFIG_DB tables, the lock,
//! the fencing term); no password is on a command line.

#[allow(dead_code)] // the BMv2 scenarios use the rest
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use weft_sonic_db::{
    ConsumerStateTable, KeyOpFieldValues, ProducerStateTable, SonicDb, SonicDbConfig, SonicDbId,
};
use weft_testbed as tb;

fn weft(sd: &Path, cred: Option<&Path>, args: &[&str]) -> (i32, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weft"));
    c.args(args);
    if args[0] == "testbed" {
        c.arg("--state-dir").arg(sd);
    }
    match cred {
        Some(f) => c.env("WEFT_DB_CREDENTIALS", f),
        None => c.env_remove("WEFT_DB_CREDENTIALS"),
    };
    let out = c
        .env_remove("WEFT_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("weft");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

struct Down(PathBuf, PathBuf, String);
impl Drop for Down {
    fn drop(&mut self) {
        let _ = tb::down(&self.0, &self.2);
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

/// `Err(text)` when Redis refused the command.
async fn try_cmd(db: &SonicDb, id: SonicDbId, args: &[&str]) -> Result<(), String> {
    let mut c = db.connect(id).await.map_err(|e| e.to_string())?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async::<redis::Value>(c.raw())
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn refused(r: Result<(), String>, what: &str) {
    match r {
        Err(e) if e.contains("NoPerm") || e.contains("NOPERM") || e.contains("no permissions") => {}
        other => panic!("{what}: expected NOPERM, got {other:?}"),
    }
}

#[test]
fn each_role_writes_its_own_keys_and_is_refused_the_others() {
    let (dir, fabric, text) = common::small_example("acl");
    let sd = dir.join("state");
    let file = dir.join("fabric.yaml");
    std::fs::write(&file, &text).expect("intent");
    let f = file.to_string_lossy().into_owned();
    let _down = Down(sd.clone(), dir.clone(), fabric.clone());
    let (code, out) = weft(&sd, None, &["testbed", "up", &f, "--db-only", "--acl"]);
    assert_eq!(code, 0, "{out}");
    let acl = tb::acl::files(&sd).expect("acl files");
    assert!(out.contains(&format!(
        "export WEFT_DB_CREDENTIALS={}",
        acl.controller.display()
    )));
    for p in [&acl.acl, &acl.controller, &acl.plugin] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(p).expect("file").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", p.display());
    }

    // No credentials: the default user is off.
    let (code, out) = weft(&sd, None, &["apply", &f, "--no-wait"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("Authentication required") || out.contains("NOAUTH"),
        "{out}"
    );
    // The controller's file: everything is written.
    let (code, out) = weft(&sd, Some(&acl.controller), &["apply", &f, "--no-wait"]);
    assert_eq!(code, 0, "{out}");

    let st = tb::State::load(&sd).expect("state");
    let db = st.switch("leaf1").expect("leaf1").db.clone();
    let as_role = |cred: &Path| {
        SonicDb::new(SonicDbConfig::parse(&tb::acl::with_credentials(&db, cred)).expect("endpoint"))
    };
    let ctl = as_role(&acl.controller);
    let plugin = as_role(&acl.plugin);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        use SonicDbId::*;
        // The controller outside its role.
        refused(
            try_cmd(
                &ctl,
                ApplStateDb,
                &["HSET", "P4RT_TABLE:FIXED_IPV4_TABLE:{}", "action", "drop"],
            )
            .await,
            "controller writes APPL_STATE_DB P4RT_TABLE",
        );
        refused(
            try_cmd(
                &ctl,
                StateDb,
                &["HSET", "WEFT_PLUGIN|status", "state", "running"],
            )
            .await,
            "controller writes the plugin's status",
        );
        refused(
            try_cmd(
                &ctl,
                StateDb,
                &["HSET", "PORT_TABLE|Ethernet0", "oper_status", "up"],
            )
            .await,
            "controller writes STATE_DB PORT_TABLE",
        );
        refused(
            try_cmd(&ctl, CountersDb, &["HSET", "COUNTERS:oid:0x1", "x", "1"]).await,
            "controller writes COUNTERS_DB",
        );
        refused(
            try_cmd(&ctl, ApplDb, &["FLUSHALL"]).await,
            "controller FLUSHALL",
        );
        refused(
            try_cmd(&ctl, ApplDb, &["CONFIG", "SET", "save", ""]).await,
            "controller CONFIG SET",
        );
        // ... and inside it.
        try_cmd(&ctl, ConfigDb, &["HSET", "PORT|Ethernet0", "mtu", "9100"])
            .await
            .expect("controller writes CONFIG_DB PORT");
        try_cmd(&ctl, StateDb, &["HGETALL", "WEFT_PLUGIN|status"])
            .await
            .expect("controller reads STATE_DB");

        // The plugin outside its role.
        refused(
            try_cmd(
                &plugin,
                ConfigDb,
                &["HSET", "PORT|Ethernet0", "mtu", "1500"],
            )
            .await,
            "plugin writes CONFIG_DB",
        );
        refused(
            try_cmd(&plugin, ApplDb, &["SET", weft_sonic_db::TERM_KEY, "999999"]).await,
            "plugin raises the fencing term",
        );
        refused(
            try_cmd(&plugin, StateDb, &["DEL", &format!("WEFT_LOCK|{fabric}")]).await,
            "plugin deletes the fabric's lock",
        );
        let mut forged = ProducerStateTable::new(&plugin, ApplDb, "P4RT_TABLE")
            .await
            .expect("producer handle");
        let e = forged
            .apply(&[KeyOpFieldValues::set(
                "FIXED_IPV4_TABLE:{\"match/ipv4_dst\":\"10.9.9.0/24\"}".to_string(),
                [("action", "drop")],
            )])
            .await
            .expect_err("the plugin produces an entry");
        refused(Err(e.to_string()), "plugin writes APPL_DB as a producer");
        refused(
            try_cmd(&plugin, ApplDb, &["SHUTDOWN", "NOSAVE"]).await,
            "plugin SHUTDOWN",
        );
        // ... and inside it: it pops what the controller wrote and mirrors it.
        let mut consumer = ConsumerStateTable::new(&plugin, ApplDb, "P4RT_TABLE")
            .await
            .expect("consumer");
        let popped = consumer.pop(1000).await.expect("plugin pops APPL_DB");
        assert!(
            !popped.is_empty(),
            "the controller's entries are there to pop"
        );
        try_cmd(
            &plugin,
            ApplStateDb,
            &[
                "HSET",
                &format!("P4RT_TABLE:{}", popped[0].key),
                "action",
                "x",
            ],
        )
        .await
        .expect("plugin writes APPL_STATE_DB");
        try_cmd(
            &plugin,
            StateDb,
            &["HSET", "WEFT_PLUGIN|status", "state", "running"],
        )
        .await
        .expect("plugin writes its status");
        try_cmd(&plugin, CountersDb, &["HSET", "COUNTERS:oid:0x1", "x", "1"])
            .await
            .expect("plugin writes COUNTERS_DB");
        let snap = weft_sonic_schema::snapshot::KEY;
        try_cmd(&plugin, CountersDb, &["HSET", snap, "stamp", "1"])
            .await
            .expect("plugin writes its counters' snapshot");
        refused(
            try_cmd(&ctl, CountersDb, &["HSET", snap, "stamp", "1"]).await,
            "controller writes the counters' snapshot",
        );
    });

    // No password on any command line.
    let passwords: Vec<String> = [&acl.controller, &acl.plugin]
        .iter()
        .map(|p| {
            std::fs::read_to_string(p)
                .expect("cred")
                .split_whitespace()
                .nth(1)
                .expect("password")
                .to_string()
        })
        .collect();
    for p in &st.processes {
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", p.pid)).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        for pw in &passwords {
            assert!(!cmdline.contains(pw.as_str()), "{}: {cmdline}", p.name);
        }
        assert!(
            p.cmd
                .iter()
                .all(|a| passwords.iter().all(|pw| !a.contains(pw.as_str())))
        );
    }
}
