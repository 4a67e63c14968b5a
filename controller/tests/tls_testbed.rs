//! P4Runtime over mutual TLS on the testbed (`weft testbed up --tls`): certificates made by the
//! testbed with openssl, BMv2 requiring a client certificate. Proves: the plugins program their
//! BMv2 over TLS (`weft apply` converges, every host pair answers ping), and a plaintext client
//! (the independent p4rt-dump) is refused. Needs root and BMv2 (SKIPPED without them).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use weft_testbed as tb;

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

#[test]
fn plugins_program_bmv2_over_mutual_tls_and_a_plaintext_client_is_refused() {
    let test = "plugins_program_bmv2_over_mutual_tls_and_a_plaintext_client_is_refused";
    if !common::is_root() {
        common::skip_or_fail(test, "not root (namespaces need it)");
        return;
    }
    if weft_tests::bmv2::find_bmv2().is_none() {
        common::skip_or_fail(test, "BMv2 (simple_switch_grpc) not found");
        return;
    }
    let (dir, fabric, text) = common::small_example("tls");
    let sd = dir.join("state");
    let file = dir.join("fabric.yaml");
    std::fs::write(&file, text).expect("intent");
    let f = file.to_string_lossy().into_owned();
    struct Down(std::path::PathBuf, std::path::PathBuf, String);
    impl Drop for Down {
        fn drop(&mut self) {
            let _ = tb::down(&self.0, &self.2);
            let _ = std::fs::remove_dir_all(&self.1);
        }
    }
    let _down = Down(sd.clone(), dir.clone(), fabric);
    let weft = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_weft"));
        c.args(args);
        if args[0] == "testbed" {
            c.arg("--state-dir").arg(&sd);
        }
        let out = c.stdin(Stdio::null()).output().expect("weft");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (code, out) = weft(&["testbed", "up", &f, "--tls"]);
    assert_eq!(code, 0, "{out}");
    let st = tb::State::load(&sd).expect("state");
    for p in &st.processes {
        if p.name.starts_with("bmv2 ") {
            assert!(
                p.cmd.iter().any(|a| a == "--grpc-server-with-client-auth"),
                "{:?}",
                p.cmd
            );
        }
        if p.name.starts_with("plugin ") {
            assert!(p.cmd.iter().any(|a| a == "--p4rt-cert"), "{:?}", p.cmd);
        }
    }
    let (code, out) = weft(&["apply", &f, "--timeout", "60s"]);
    assert_eq!(code, 0, "the plugins program BMv2 over TLS:\n{out}");
    let r = tb::ping_all(&st, 2);
    assert!(r.iter().all(|x| x.2), "every host pair answers: {r:?}");

    if Path::new(&format!("{REPO}/.venv/bin/python")).exists() {
        let sw = st.switch("leaf1").expect("leaf1");
        let out = Command::new("timeout")
            .args(["30", "ip", "netns", "exec", &st.netns, "env"])
            .arg("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python")
            .arg(format!("{REPO}/.venv/bin/python"))
            .arg("/work/shared/tools/p4rt-dump")
            .args(["--addr", &sw.p4rt_address])
            .args(["--device-id", &sw.device_id.to_string()])
            .args(["--p4info", &format!("{REPO}/p4/build/weft.p4info.txtpb")])
            .output()
            .expect("p4rt-dump");
        assert!(
            !out.status.success(),
            "a plaintext P4Runtime client read a TLS switch"
        );
    }
}
