//! The telemetry twin in real redis-servers, for the twin's tests and bench: a fat-tree whose
//! switches' DBs are spread over a few servers, the twin writing into them, and the two ways
//! a window is sampled: through the DBs (`weft_observe::source::db::Reader`, what
//! `weft diagnose` runs) or from the twin's rows in hand (the same decoding, no I/O).

use std::path::{Path, PathBuf};

use weft_diagnose::Sample;
use weft_observe::source::db::{Reader, Spec, SwitchPorts, sample_of_rows};
use weft_sonic_schema::Row;
use weft_tests::process::cpu_seconds;
use weft_tests::redis::{RedisServer, RedisServerOptions};
use weft_topology::{SwitchIdx, Topology};
use weft_twin::score::Sampler;
use weft_twin::write::Writer;
use weft_twin::{Config, Twin, TwinError};

/// A twin's fabric in `servers` real redis-servers.
pub struct Bed {
    pub servers: Vec<RedisServer>,
    pub file: PathBuf,
    pub topo: Topology,
}

impl Bed {
    /// A fat-tree of radix `k` named `name` in `servers` servers; its intent written in `dir`.
    pub fn start(k: u32, name: &str, servers: usize, dir: &Path) -> Bed {
        let n = weft_twin::intent::switches(k).expect("fat-tree").len();
        let databases = weft_twin::intent::databases(n, servers);
        let servers: Vec<RedisServer> = (0..servers)
            .map(|_| {
                RedisServer::start_with(RedisServerOptions {
                    databases,
                    ..Default::default()
                })
                .expect("redis-server (apt-get install -y redis-server)")
            })
            .collect();
        let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
        let text = weft_twin::intent::fat_tree(k, name, |i| weft_twin::intent::spread(i, n, &urls))
            .expect("intent");
        let file = dir.join(format!("{name}.yaml"));
        std::fs::write(&file, &text).expect("intent file");
        let topo = weft_topology::load_str(&text, &file.to_string_lossy()).expect("valid intent");
        Bed {
            servers,
            file,
            topo,
        }
    }

    /// Redis-servers' CPU seconds so far (user + system, from /proc).
    pub fn servers_cpu(&self) -> f64 {
        self.servers
            .iter()
            .filter_map(|s| s.pid())
            .map(cpu_seconds)
            .sum()
    }
}

/// This process's user + system CPU seconds.
pub fn self_cpu() -> f64 {
    cpu_seconds(std::process::id())
}

pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Unix ms now.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A twin of `topo` with `cfg`, `missing` switches never written.
pub fn twin(topo: &Topology, cfg: Config, missing: &[SwitchIdx]) -> Twin {
    let mut t = Twin::new(topo.clone(), cfg).expect("twin");
    for s in missing {
        t.life[*s].missing = true;
    }
    t
}

/// Samples through the DBs: the twin writes what changed, the reader reads every switch.
pub struct Through {
    pub writer: Writer,
    pub reader: Reader,
    /// The last sample's bytes read.
    pub bytes: usize,
}

impl Through {
    pub async fn new(twin: &Twin) -> Through {
        Through {
            writer: Writer::connect(twin).await.expect("twin writer"),
            reader: Reader::new(&twin.topo),
            bytes: 0,
        }
    }
}

impl Sampler for Through {
    async fn sample(&mut self, twin: &Twin, changed: &[SwitchIdx]) -> Result<Sample, TwinError> {
        self.writer.write(twin, changed).await?;
        let s = self.reader.sweep(twin.cfg.epoch_ms + twin.now()).await;
        self.bytes = s.bytes;
        Ok(Sample {
            t_ms: twin.now(),
            switches: s.switches,
        })
    }
}

/// Samples the twin's rows in hand, decoded and judged as a read of the DBs would be.
pub struct Direct {
    pub spec: Spec,
    /// Each switch's ports, built once as the reader builds them.
    ports: Vec<SwitchPorts>,
}

impl Direct {
    pub fn new(t: &Topology) -> Direct {
        let spec = Spec::of(t);
        let ports = t
            .switches
            .iter()
            .map(|sw| {
                SwitchPorts::new(
                    sw.ports.iter().map(|p| p.name.clone()).collect(),
                    &spec.queues,
                )
            })
            .collect();
        Direct { spec, ports }
    }

    pub fn switch(&self, twin: &Twin, s: SwitchIdx) -> Option<weft_diagnose::SwitchSample> {
        let sw = &twin.topo.switches[s];
        let rows: Vec<(String, weft_sonic_db::FieldValues)> = twin
            .counters_rows(s)
            .iter()
            .map(weft_sonic_schema::counters::CountersRow::key_fields)
            .collect();
        let (wd, drift, status) = twin.state_rows(s);
        sample_of_rows(
            &self.spec,
            &sw.name,
            &self.ports[s],
            &rows,
            wd.iter().map(|w| (w.key(), w.to_fields())).collect(),
            drift
                .iter()
                .map(|d| (d.key(), d.state.as_str().to_string()))
                .collect(),
            status,
            twin.cfg.epoch_ms + twin.now(),
        )
        .ok()
    }
}

impl Sampler for Direct {
    async fn sample(&mut self, twin: &Twin, _changed: &[SwitchIdx]) -> Result<Sample, TwinError> {
        let switches = (0..twin.topo.switches.len())
            .filter_map(|s| Some((twin.topo.switches[s].name.clone(), self.switch(twin, s)?)))
            .collect();
        Ok(Sample {
            t_ms: twin.now(),
            switches,
        })
    }
}
