//! Write throughput to real BMv2: this client (batched, 8 Writes in flight, and 1 in flight for
//! reference) against p4lang's Python client (p4rt/bench/py_write.py) on the same BMv2 build in
//! the same run, 10k and 100k entries, each run on a fresh switch; then a read-back of 100k.
//!
//! The Python client runs twice where it can: with the project's `.venv` (PyPI's p4runtime 1.6.0
//! on protobuf 5, whose generated modules import only with the pure-Python protobuf runtime:
//! serialising is most of its time), and with Debian's python3 (python3-protobuf's C++ runtime,
//! python3-grpcio) and PI's generated p4runtime modules where BMv2's install put them on its
//! path: the faster baseline. Each line says which protobuf runtime serialised.
//!
//!   cargo bench -p weft-p4rt --bench bmv2_write
//!
//! Env: WEFT_BENCH_BATCH (updates per Write, default 1000), WEFT_BENCH_IN_FLIGHT (default 8),
//! WEFT_BENCH_COUNTS (default "10000,100000"). The pipeline is the one the BMv2 tests use.

#[path = "../tests/bmv2_support/mod.rs"]
mod bmv2_support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use bmv2_support::*;
use weft_p4rt::proto::p4::v1::{Entity, TableEntry, Update};
use weft_p4rt::{Client, P4Info, PipelineConfig, WriteOptions};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Run {
    label: String,
    count: usize,
    seconds: f64,
}

impl Run {
    fn rate(&self) -> f64 {
        self.count as f64 / self.seconds
    }
}

async fn rust_run(
    bin: &std::path::Path,
    pipeline: &PipelineConfig,
    table: &BulkTable,
    count: usize,
    opts: &WriteOptions,
    read_back: bool,
) -> anyhow::Result<(f64, Option<(f64, usize)>)> {
    let sw = start_switch(bin);
    let client = primary_with_pipeline(&sw, pipeline).await;
    let info: &P4Info = &pipeline.p4info;
    let updates: Vec<Update> = (0..count as u32)
        .map(|i| Update::insert(table.entry(info, i)))
        .collect();
    let t0 = Instant::now();
    client.write_with(&updates, opts).await?;
    let write = t0.elapsed().as_secs_f64();
    let read = if read_back {
        let t0 = Instant::now();
        let got = client
            .read(vec![Entity::from(TableEntry {
                table_id: table.table_id,
                ..Default::default()
            })])
            .await?;
        Some((t0.elapsed().as_secs_f64(), got.len()))
    } else {
        None
    };
    Ok((write, read))
}

/// A Python to run py_write.py with: (interpreter, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION, label).
type Python = (PathBuf, &'static str, &'static str);

/// The Pythons that can run py_write.py here: the `.venv` (pure-Python protobuf), and Debian's
/// python3 where it imports grpc and p4runtime with its C++ protobuf runtime.
fn pythons() -> Vec<Python> {
    let mut out = Vec::new();
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    if venv.is_file() {
        out.push((venv, "python", "python (pure-Python protobuf)"));
    } else {
        println!(
            "python client (.venv) skipped: {} not found",
            venv.display()
        );
    }
    let debian = PathBuf::from("/usr/bin/python3");
    let imports = Command::new(&debian)
        .args(["-c", "import grpc, p4.v1.p4runtime_pb2_grpc"])
        .env("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "cpp")
        .output()
        .is_ok_and(|o| o.status.success());
    if imports {
        out.push((debian, "cpp", "python (C++ protobuf)"));
    } else {
        println!(
            "python client on C++ protobuf skipped: /usr/bin/python3 cannot import grpc and p4.v1 (Debian python3-grpcio, python3-protobuf, PI's Python modules)"
        );
    }
    out
}

#[allow(clippy::too_many_arguments)]
async fn python_run(
    python: &Python,
    bin: &std::path::Path,
    pipeline: &PipelineConfig,
    table: &BulkTable,
    count: usize,
    opts: &WriteOptions,
    prebuilt: bool,
) -> anyhow::Result<f64> {
    let sw = start_switch(bin);
    // Push with this client, then leave so the Python client can be primary.
    let pusher = primary_with_pipeline(&sw, pipeline).await;
    pusher.close();
    drop(pusher);
    let info = &pipeline.p4info;
    let t = info.table(&table.table)?;
    let field_id = t.field(&table.field)?.id;
    let action = info.action(&table.action)?;
    let params: Vec<String> = action
        .params
        .iter()
        .map(|p| format!("{}:{}", p.id, p.bitwidth))
        .collect();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bench/py_write.py");
    let mut cmd = Command::new(&python.0);
    cmd.arg(script)
        .args(["--addr", &sw.grpc_addr()])
        .args(["--device-id", &sw.device_id().to_string()])
        .args(["--election-id", "100"])
        .args(["--table-id", &t.id.to_string()])
        .args(["--field-id", &field_id.to_string()])
        .args(["--field-bits", &table.field_bits.to_string()])
        .args([
            "--kind",
            if table.kind == weft_p4rt::MatchKind::Lpm {
                "lpm"
            } else {
                "exact"
            },
        ])
        .args(["--action-id", &action.id.to_string()])
        .args(["--params", &params.join(",")])
        .args(["--count", &count.to_string()])
        .args(["--batch", &opts.max_batch_updates.to_string()])
        .args(["--in-flight", &opts.max_in_flight.to_string()])
        .env("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", python.1);
    if prebuilt {
        cmd.arg("--prebuilt");
    }
    let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
    anyhow::ensure!(
        out.status.success(),
        "py_write.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout);
    let v: serde_like::Json = serde_like::parse(&line)?;
    println!("  {}: protobuf runtime {}", python.2, v.protobuf);
    anyhow::ensure!(
        v.failed_batches == 0,
        "python: {} batches failed",
        v.failed_batches
    );
    // The switch must hold every entry the Python client wrote.
    let check = Client::connect(client_config(&sw, 1))?;
    let got = check
        .read(vec![Entity::from(TableEntry {
            table_id: table.table_id,
            ..Default::default()
        })])
        .await?;
    anyhow::ensure!(
        got.len() == count,
        "python wrote {} of {count} entries",
        got.len()
    );
    Ok(v.seconds)
}

/// The two numbers read from py_write.py's JSON line, without a JSON dependency.
mod serde_like {
    pub struct Json {
        pub seconds: f64,
        pub failed_batches: u64,
        pub protobuf: String,
    }
    fn field<'a>(line: &'a str, name: &str) -> anyhow::Result<&'a str> {
        let key = format!("\"{name}\": ");
        let start = line
            .find(&key)
            .ok_or_else(|| anyhow::anyhow!("no {name} in {line}"))?
            + key.len();
        let rest = &line[start..];
        let end = rest.find([',', '}']).unwrap_or(rest.len());
        Ok(rest[..end].trim())
    }
    pub fn parse(line: &str) -> anyhow::Result<Json> {
        Ok(Json {
            seconds: field(line, "seconds")?.parse()?,
            failed_batches: field(line, "failed_batches")?.parse()?,
            protobuf: field(line, "protobuf")?.trim_matches('"').to_string(),
        })
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let Some((bin, pipeline)) = setup("bmv2_write bench") else {
        return Ok(());
    };
    let info = pipeline.p4info.clone();
    let table =
        bench_table(&info).ok_or_else(|| anyhow::anyhow!("pipeline has no table to fill"))?;
    let batch = env_usize("WEFT_BENCH_BATCH", 1000);
    let in_flight = env_usize("WEFT_BENCH_IN_FLIGHT", 8);
    let counts: Vec<usize> = std::env::var("WEFT_BENCH_COUNTS")
        .unwrap_or_else(|_| "10000,100000".into())
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    let pythons = pythons();
    let piped = WriteOptions {
        max_batch_updates: batch,
        max_batch_bytes: 1 << 20,
        max_in_flight: in_flight,
    };
    let serial = WriteOptions {
        max_in_flight: 1,
        ..piped.clone()
    };
    println!(
        "bmv2_write: table {} ({} {} bits) action {}, batch {batch}, {in_flight} in flight",
        table.table, table.field, table.field_bits, table.action
    );

    let mut runs: Vec<Run> = Vec::new();
    for &count in &counts {
        let (w, read) = rust_run(&bin, &pipeline, &table, count, &piped, count >= 100_000).await?;
        runs.push(Run {
            label: format!("rust {in_flight} in flight"),
            count,
            seconds: w,
        });
        if let Some((secs, n)) = read {
            anyhow::ensure!(n == count, "read back {n} of {count}");
            println!(
                "read back {n} entries in {secs:.3} s ({:.0} entries/s, one Read)",
                n as f64 / secs
            );
        }
        let (w, _) = rust_run(&bin, &pipeline, &table, count, &serial, false).await?;
        runs.push(Run {
            label: "rust 1 in flight".into(),
            count,
            seconds: w,
        });
        for py in &pythons {
            for prebuilt in [false, true] {
                let s = python_run(py, &bin, &pipeline, &table, count, &piped, prebuilt).await?;
                runs.push(Run {
                    label: format!(
                        "{} {in_flight} in flight{}",
                        py.2,
                        if prebuilt { ", pre-serialised" } else { "" }
                    ),
                    count,
                    seconds: s,
                });
            }
        }
    }

    println!(
        "\n{:<58} {:>8} {:>9} {:>12} {:>10}",
        "client", "entries", "seconds", "entries/s", "rust/this"
    );
    for count in &counts {
        let rust = runs.iter().find(|r| {
            r.count == *count && r.label.starts_with("rust") && !r.label.contains(" 1 in")
        });
        for r in runs.iter().filter(|r| r.count == *count) {
            let ratio = rust.map_or(f64::NAN, |x| x.rate() / r.rate());
            println!(
                "{:<58} {:>8} {:>9.3} {:>12.0} {:>10.2}",
                r.label,
                r.count,
                r.seconds,
                r.rate(),
                ratio
            );
        }
    }
    println!(
        "\nreference ceiling (FACTS.md): ~140-155k entries/s with 8 Writes in flight on this kind of machine"
    );
    Ok(())
}
