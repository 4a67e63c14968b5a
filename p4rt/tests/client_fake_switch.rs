//! The client against a fake P4Runtime switch (tests/fake_switch): arbitration and takeover,
//! per-update errors, batching and pipelining, cookies, reconnect, packet I/O, TLS and mTLS,
//! large reads. The same behaviours are proven on real BMv2 in bmv2_*.rs.

mod common;
mod fake_switch;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fake_switch::FakeSwitch;
use weft_p4rt::proto::p4::v1::{Entity, PacketOut, TableEntry, Update};
use weft_p4rt::{
    Client, ClientConfig, Code, Error, Event, Events, Mastership, PipelineConfig, PipelinePush,
    TlsConfig, WriteOptions,
};

const T: Duration = Duration::from_secs(20);

fn any_addr() -> SocketAddr {
    ([127, 0, 0, 1], 0).into()
}

fn config(addr: SocketAddr, election_id: u128) -> ClientConfig {
    let mut c = ClientConfig::new(addr.to_string(), 1, election_id);
    c.reconnect_initial = Duration::from_millis(20);
    c.reconnect_max = Duration::from_millis(200);
    c
}

async fn expect_event(events: &mut Events, want: impl Fn(&Event) -> bool, what: &str) -> Event {
    let deadline = tokio::time::Instant::now() + T;
    loop {
        match tokio::time::timeout_at(deadline, events.next()).await {
            Ok(Some(e)) if want(&e) => return e,
            Ok(Some(_)) => continue,
            Ok(None) => panic!("event stream closed while waiting for {what}"),
            Err(_) => panic!("no {what} within {T:?}"),
        }
    }
}

fn route(i: u32) -> TableEntry {
    let info = common::p4info();
    info.table_entry("ingress.route")
        .and_then(|b| b.exact("meta.vrf", 1u16))
        .and_then(|b| b.lpm("hdr.ipv4.dst", (10u32 << 24) | (i << 8), 24))
        .and_then(|b| {
            b.action(
                info.action_call("ingress.set_port")?
                    .param("port", i % 512)?,
            )
        })
        .and_then(|b| b.build())
        .expect("route")
}

#[tokio::test]
async fn client_becomes_primary_and_answers_capabilities() {
    let sw = fake_switch::start(FakeSwitch::default(), any_addr(), None).await;
    let client = Client::connect(config(sw.addr, 10)).expect("connect");
    client.wait_primary(T).await.expect("primary");
    assert!(client.is_primary());
    assert_eq!(client.capabilities().await.expect("capabilities"), "1.3.0");
}

#[tokio::test]
async fn lower_election_id_is_backup_refused_writes_and_takes_over_when_primary_leaves() {
    let sw = fake_switch::start(FakeSwitch::default(), any_addr(), None).await;
    let high = Client::connect(config(sw.addr, 20)).expect("connect");
    high.wait_primary(T).await.expect("high primary");
    let low = Client::connect(config(sw.addr, 10)).expect("connect");
    let mut low_events = low.events();
    let m = low.wait_connected(T).await.expect("low connected");
    // The first arbitration answer may still be in flight; wait for the backup state.
    let mut rx = low.watch_mastership();
    let _ = tokio::time::timeout(
        T,
        rx.wait_for(|m| {
            matches!(
                m,
                Mastership::Backup {
                    primary_election_id: 20
                }
            )
        }),
    )
    .await;
    assert!(
        matches!(
            low.mastership(),
            Mastership::Backup {
                primary_election_id: 20
            }
        ),
        "{m:?}"
    );

    let err = low.write(&[Update::insert(route(1))]).await.err();
    assert!(matches!(err, Some(Error::NotPrimary { .. })), "{err:?}");

    high.close();
    drop(high);
    expect_event(
        &mut low_events,
        |e| *e == Event::BecamePrimary,
        "BecamePrimary",
    )
    .await;
    low.write(&[Update::insert(route(1))])
        .await
        .expect("write as new primary");
}

#[tokio::test]
async fn primary_is_told_when_a_higher_election_id_arrives() {
    let sw = fake_switch::start(FakeSwitch::default(), any_addr(), None).await;
    let first = Client::connect(config(sw.addr, 5)).expect("connect");
    first.wait_primary(T).await.expect("primary");
    let mut events = first.events();
    let second = Client::connect(config(sw.addr, 6)).expect("connect");
    second.wait_primary(T).await.expect("second primary");
    let e = expect_event(
        &mut events,
        |e| matches!(e, Event::LostPrimary { .. }),
        "LostPrimary",
    )
    .await;
    assert_eq!(
        e,
        Event::LostPrimary {
            primary_election_id: 6
        }
    );
    assert!(!first.is_primary());
}

#[tokio::test]
async fn per_update_errors_name_the_entry_and_keep_their_index() {
    let sw = fake_switch::start(FakeSwitch::default(), any_addr(), None).await;
    let client = Client::connect(config(sw.addr, 1)).expect("connect");
    client.set_p4info(common::p4info());
    client.wait_primary(T).await.expect("primary");
    client
        .write(&[Update::insert(route(1)), Update::insert(route(2))])
        .await
        .expect("first write");

    let again = [
        Update::insert(route(3)),
        Update::insert(route(2)),
        Update::delete(route(9)),
    ];
    match client.write(&again).await {
        Err(Error::Write(w)) => {
            assert_eq!(w.total, 3);
            assert_eq!(w.failed.len(), 2, "{w:?}");
            assert_eq!(
                (w.failed[0].index, w.failed[0].code, w.failed[0].update_type),
                (1, Code::AlreadyExists, "INSERT")
            );
            assert_eq!(
                w.failed[0].entity,
                "table ingress.route {meta.vrf=0x01, hdr.ipv4.dst=0x0a000200/24}"
            );
            assert_eq!((w.failed[1].index, w.failed[1].code), (2, Code::NotFound));
            assert_eq!(w.failed[1].space, "fake");
        }
        other => panic!("expected per-update errors, got {other:?}"),
    }
    // The good update of the failed batch was applied.
    let read = client
        .read(vec![Entity::from(TableEntry {
            table_id: common::ROUTE,
            ..Default::default()
        })])
        .await;
    assert_eq!(read.expect("read").len(), 3);
}

#[tokio::test]
async fn writes_are_split_into_batches_with_several_in_flight() {
    let fake = FakeSwitch {
        write_delay: Duration::from_millis(20),
        ..Default::default()
    };
    let sw = fake_switch::start(fake, any_addr(), None).await;
    let client = Client::connect(config(sw.addr, 1)).expect("connect");
    client.wait_primary(T).await.expect("primary");
    let updates: Vec<Update> = (0..5000).map(|i| Update::insert(route(i))).collect();
    let opts = WriteOptions {
        max_batch_updates: 100,
        max_batch_bytes: 1 << 20,
        max_in_flight: 8,
    };
    client.write_with(&updates, &opts).await.expect("write");
    let stats = &sw.fake.stats;
    assert_eq!(stats.writes.load(Ordering::SeqCst), 50);
    assert_eq!(stats.max_batch.load(Ordering::SeqCst), 100);
    let max = stats.max_in_flight.load(Ordering::SeqCst);
    assert!((2..=8).contains(&max), "max in flight {max}");
    assert_eq!(
        sw.fake.state.lock().map(|s| s.entries.len()).unwrap_or(0),
        5000
    );
}

#[tokio::test]
async fn read_back_equals_written_even_when_the_switch_pads_values() {
    let sw = fake_switch::start(FakeSwitch::default(), any_addr(), None).await;
    let client = Client::connect(config(sw.addr, 1)).expect("connect");
    client.wait_primary(T).await.expect("primary");
    let written: Vec<TableEntry> = (0..20).map(route).collect();
    let updates: Vec<Update> = written.iter().cloned().map(Update::insert).collect();
    client.write(&updates).await.expect("write");
    let mut read = client
        .read(vec![Entity::from(TableEntry::default())])
        .await
        .expect("read");
    let mut want: Vec<Entity> = written.into_iter().map(Entity::from).collect();
    let key = |e: &Entity| format!("{e:?}");
    read.sort_by_key(key);
    want.sort_by_key(key);
    assert_eq!(read, want);
}

#[tokio::test]
async fn register_read_unimplemented_is_a_typed_error() {
    let sw = fake_switch::start(FakeSwitch::default(), any_addr(), None).await;
    let client = Client::connect(config(sw.addr, 1)).expect("connect");
    let info = common::p4info();
    let reg = info.register_entry("flowlet", None).expect("register");
    let err = client.read(vec![Entity::from(reg)]).await.err();
    assert!(
        matches!(err, Some(Error::Unimplemented { op: "Read", .. })),
        "{err:?}"
    );
}

#[tokio::test]
async fn read_larger_than_grpc_default_4mib_succeeds() {
    let fake = FakeSwitch::default();
    {
        let mut st = fake.state.lock().expect("state");
        // ~6 MB in one ReadResponse.
        st.extra_read = (0..60_000u32)
            .map(|i| {
                let mut e = route(i % 1000);
                e.metadata = vec![7; 80];
                e.priority = i as i32;
                Entity::from(e)
            })
            .collect();
    }
    let sw = fake_switch::start(fake, any_addr(), None).await;
    let client = Client::connect(config(sw.addr, 1)).expect("connect");
    let read = client
        .read(vec![Entity::from(TableEntry::default())])
        .await
        .expect("large read");
    assert_eq!(read.len(), 60_000);

    // With gRPC's default limit the same read fails: the raised limit is what makes it work.
    let mut small = config(sw.addr, 2);
    small.max_message_size = 4 << 20;
    let small = Client::connect(small).expect("connect");
    let err = small
        .read(vec![Entity::from(TableEntry::default())])
        .await
        .err();
    assert!(
        matches!(
            err,
            Some(Error::Rpc {
                code: Code::OutOfRange | Code::ResourceExhausted,
                ..
            })
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn unchanged_pipeline_is_not_pushed_again() {
    let sw = fake_switch::start(FakeSwitch::default(), any_addr(), None).await;
    let client = Client::connect(config(sw.addr, 1)).expect("connect");
    client.wait_primary(T).await.expect("primary");
    use weft_p4rt::proto::prost::Message;
    let p4info = common::raw_p4info().encode_to_vec();
    let pipeline = PipelineConfig::new(&p4info, b"{}".to_vec()).expect("pipeline");
    assert_eq!(client.pipeline_cookie().await.expect("cookie"), None);
    assert_eq!(
        client.set_pipeline(&pipeline).await.expect("push"),
        PipelinePush::Pushed
    );
    assert_eq!(
        client.pipeline_cookie().await.expect("cookie"),
        Some(pipeline.cookie)
    );
    assert_eq!(
        client.set_pipeline(&pipeline).await.expect("push"),
        PipelinePush::Unchanged
    );
    let changed = PipelineConfig::new(&p4info, b"{ }".to_vec()).expect("pipeline");
    assert_eq!(
        client.set_pipeline(&changed).await.expect("push"),
        PipelinePush::Pushed
    );
    assert_eq!(sw.fake.stats.pipeline_pushes.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn client_reconnects_and_regains_primary_after_switch_restart() {
    let sw = fake_switch::start(FakeSwitch::default(), any_addr(), None).await;
    let addr = sw.addr;
    let client = Client::connect(config(addr, 1)).expect("connect");
    let mut events = client.events();
    client.wait_primary(T).await.expect("primary");
    expect_event(&mut events, |e| *e == Event::BecamePrimary, "BecamePrimary").await;

    sw.stop().await;
    expect_event(
        &mut events,
        |e| matches!(e, Event::LostPrimary { .. }),
        "LostPrimary",
    )
    .await;
    expect_event(
        &mut events,
        |e| matches!(e, Event::Disconnected { .. }),
        "Disconnected",
    )
    .await;
    assert_eq!(client.mastership(), Mastership::Disconnected);
    let err = client.send_packet(PacketOut::default()).await.err();
    assert!(matches!(err, Some(Error::Disconnected)), "{err:?}");

    let sw = fake_switch::start(FakeSwitch::default(), addr, None).await;
    expect_event(&mut events, |e| *e == Event::Reconnected, "Reconnected").await;
    expect_event(
        &mut events,
        |e| *e == Event::BecamePrimary,
        "BecamePrimary again",
    )
    .await;
    client
        .write(&[Update::insert(route(1))])
        .await
        .expect("write after reconnect");
    drop(sw);
}

#[tokio::test]
async fn packet_out_comes_back_as_packet_in_event() {
    let sw = fake_switch::start(FakeSwitch::default(), any_addr(), None).await;
    let client = Client::connect(config(sw.addr, 1)).expect("connect");
    let mut events = client.events();
    client.wait_primary(T).await.expect("primary");
    let info = common::p4info();
    let out = info
        .packet_out(vec![0xaa; 60])
        .and_then(|b| b.meta("egress_port", 4u16))
        .and_then(|b| b.meta("flags", 0u8))
        .and_then(|b| b.build())
        .expect("packet");
    client.send_packet(out).await.expect("send");
    let e = expect_event(&mut events, |e| matches!(e, Event::PacketIn(_)), "PacketIn").await;
    let Event::PacketIn(p) = e else {
        unreachable!()
    };
    assert_eq!(p.payload, vec![0xaa; 60]);
    let decoded = info.decode_packet_in(&p).expect("decode");
    assert_eq!(decoded.get_u64("ingress_port"), Some(4));
}

struct Certs {
    dir: PathBuf,
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Certs {
    fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.dir.join(name)).expect("cert file")
    }
}

/// A CA, a server certificate for localhost/127.0.0.1 and a client certificate, made with the
/// openssl CLI (None when it is missing).
fn make_certs(tag: &str) -> Option<Certs> {
    if Command::new("openssl").arg("version").output().is_err() {
        return None;
    }
    let dir = std::env::temp_dir().join(format!("weft-p4rt-tls-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec![
        "req",
        "-x509",
        "-days",
        "2",
        "-subj",
        "/CN=weft-test-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    ];
    ca.extend_from_slice(&ec);
    ca.extend_from_slice(&[
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign",
    ]);
    run(&ca);
    for (name, ext) in [
        (
            "server",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        ),
        (
            "client",
            "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n",
        ),
    ] {
        let mut req = vec!["req", "-subj"];
        let subj = format!("/CN=weft-{name}");
        let key = format!("{name}.key");
        let csr = format!("{name}.csr");
        let pem = format!("{name}.pem");
        let extfile = format!("{name}.ext");
        std::fs::write(dir.join(&extfile), ext).ok()?;
        req.extend_from_slice(&[&subj, "-keyout", &key, "-out", &csr]);
        req.extend_from_slice(&ec);
        run(&req);
        run(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &pem,
            "-extfile",
            &extfile,
        ]);
    }
    Some(Certs { dir })
}

fn tls_config(certs: &Certs, with_client_cert: bool) -> TlsConfig {
    let client = |d: &Path| (d.join("client.pem"), d.join("client.key"));
    let (cert, key) = client(&certs.dir);
    TlsConfig::from_files(
        certs.dir.join("ca.pem"),
        with_client_cert.then_some((cert.as_path(), key.as_path())),
        Some("localhost".into()),
    )
    .expect("tls files")
}

#[tokio::test]
async fn tls_client_connects_to_tls_switch_and_plain_client_does_not() {
    let Some(certs) = make_certs("tls") else {
        println!(
            "SKIPPED: tls_client_connects_to_tls_switch_and_plain_client_does_not: openssl CLI not found"
        );
        return;
    };
    let tls = fake_switch::server_tls(&certs.read("server.pem"), &certs.read("server.key"), None);
    let sw = fake_switch::start(FakeSwitch::default(), any_addr(), Some(tls)).await;
    let client =
        Client::connect(config(sw.addr, 1).with_tls(tls_config(&certs, false))).expect("connect");
    client.wait_primary(T).await.expect("primary over TLS");
    assert_eq!(client.capabilities().await.expect("capabilities"), "1.3.0");

    let plain = Client::connect(config(sw.addr, 2)).expect("connect");
    let err = plain.capabilities().await.err();
    assert!(err.is_some(), "plaintext client talked to a TLS switch");
}

#[tokio::test]
async fn mutual_tls_switch_accepts_client_certificate_and_refuses_none() {
    let Some(certs) = make_certs("mtls") else {
        println!(
            "SKIPPED: mutual_tls_switch_accepts_client_certificate_and_refuses_none: openssl CLI not found"
        );
        return;
    };
    let tls = fake_switch::server_tls(
        &certs.read("server.pem"),
        &certs.read("server.key"),
        Some(&certs.read("ca.pem")),
    );
    let sw = fake_switch::start(FakeSwitch::default(), any_addr(), Some(tls)).await;
    let with_cert =
        Client::connect(config(sw.addr, 1).with_tls(tls_config(&certs, true))).expect("connect");
    with_cert.wait_primary(T).await.expect("primary over mTLS");

    let without =
        Client::connect(config(sw.addr, 2).with_tls(tls_config(&certs, false))).expect("connect");
    let err = without.capabilities().await.err();
    assert!(
        err.is_some(),
        "client without certificate was accepted by an mTLS switch"
    );
    assert_eq!(without.mastership(), Mastership::Disconnected);
}
