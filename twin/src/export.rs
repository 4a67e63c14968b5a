//! The twin's switches as Prometheus sees plugins: each switch's `/metrics` (the plugin's own
//! registry, `weft_telemetry::PluginMetrics`, fed the rows its last poll wrote) on a loopback
//! port of its own, so a real Prometheus can scrape the twin as it scrapes a fabric.

use weft_sonic_schema::counters::CountersRow;
use weft_telemetry::{MetricsServer, PluginMetrics, SwitchSnapshot};
use weft_topology::SwitchIdx;

use crate::{Twin, TwinError};

pub struct Exporter {
    /// Per switch (`None`: not exported, a switch whose plugin never ran).
    switches: Vec<Option<(PluginMetrics, MetricsServer)>>,
}

impl Exporter {
    /// One `/metrics` per switch of `twin` on 127.0.0.1 (ports chosen by the system); must be
    /// called inside a tokio runtime.
    pub async fn start(twin: &Twin) -> Result<Exporter, TwinError> {
        let mut switches = Vec::new();
        for (s, sw) in twin.topo.switches.iter().enumerate() {
            if twin.life[s].missing {
                switches.push(None);
                continue;
            }
            let m = PluginMetrics::new(sw.name.clone());
            let srv = weft_telemetry::serve("127.0.0.1:0", m.registry())
                .await
                .map_err(|e| TwinError::Export(std::io::Error::other(e.to_string())))?;
            m.state("running", &["running"]);
            switches.push(Some((m, srv)));
        }
        Ok(Exporter { switches })
    }

    /// `(switch, host:port)` of every exported switch, for the scrape configuration.
    pub fn targets(&self, twin: &Twin) -> Vec<(String, String)> {
        self.switches
            .iter()
            .enumerate()
            .filter_map(|(s, x)| {
                let (_, srv) = x.as_ref()?;
                Some((twin.topo.switches[s].name.clone(), srv.addr.to_string()))
            })
            .collect()
    }

    /// Feeds `switches`' metrics what their last poll wrote (a dead plugin's endpoint stops
    /// answering, as a dead plugin's does).
    pub fn update(&mut self, twin: &Twin, switches: &[SwitchIdx]) {
        for &s in switches {
            if twin.life[s].dead_from.is_some_and(|d| twin.now() >= d) {
                self.switches[s] = None;
                continue;
            }
            let Some((m, _)) = &self.switches[s] else {
                continue;
            };
            let rows = twin.counters_rows(s);
            m.set_counters(SwitchSnapshot::from_rows(&rows));
            for r in &rows {
                if let CountersRow::Port(p) = r
                    && let (Some(h), Some(shift)) = (&p.depth_histogram, p.histogram_shift)
                {
                    m.set_depth(&p.port, h, shift as u32);
                }
            }
            let (wd, ..) = twin.state_rows(s);
            for w in wd {
                let stormed = w.status == weft_sonic_schema::state::WdStatus::Stormed;
                // The storms counter counts each declared storm once.
                for _ in 0..w.detected.saturating_sub(self.declared(s, &w.port)) {
                    m.watchdog(&w.port, w.priority, stormed, true);
                }
                m.watchdog(&w.port, w.priority, stormed, false);
            }
        }
    }

    /// Storms already counted on `port` of switch `s`.
    fn declared(&self, s: SwitchIdx, port: &str) -> u64 {
        let Some((m, _)) = &self.switches[s] else {
            return 0;
        };
        let text = weft_telemetry::metrics::encode(&m.registry());
        text.lines()
            .filter(|l| l.starts_with("weft_pfc_watchdog_storms_total{"))
            .filter(|l| l.contains(&format!("port=\"{port}\"")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .map(|v| v as u64)
            .sum()
    }
}
