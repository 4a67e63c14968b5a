//! Where a window of every switch's counters comes from, for `weft diagnose` (and any view
//! that judges rates): the switches' own DBs ([`db`], the default), or a Prometheus that
//! scrapes the plugins ([`prometheus`]). Both give the same [`Window`] to the same rules.
//!
//! ```text
//!  --source db                  every switch's COUNTERS_DB/STATE_DB, one round trip per
//!                               redis-server per sample (db::Reader)
//!  --source prometheus=URL      PromQL over the plugins' metric families: the raw samples
//!                               of the window, each switch at its own scrape times
//! ```

pub mod db;
mod http;
pub mod prometheus;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use weft_diagnose::{Sample, Window};
use weft_topology::Topology;

/// A switch a window could not judge, and why (`no-data`, `stale`, `unreachable`): the same
/// unknown every reader reports.
pub use crate::read::Unknown as Unjudged;

/// Where counters are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Every switch's own DBs.
    Db,
    /// A Prometheus (or a store with its HTTP query API) at this base URL.
    Prometheus(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error("unknown source {0:?}: use db or prometheus=http://HOST:PORT")]
    Unknown(String),
    #[error("{0}")]
    Prometheus(#[from] prometheus::PromError),
}

impl std::str::FromStr for Source {
    type Err = SourceError;
    fn from_str(s: &str) -> Result<Source, SourceError> {
        match s.split_once('=') {
            None if s == "db" => Ok(Source::Db),
            Some(("prometheus", url)) => {
                prometheus::Base::parse(url)?;
                Ok(Source::Prometheus(url.to_string()))
            }
            _ => Err(SourceError::Unknown(s.to_string())),
        }
    }
}

/// Above this many switches a window keeps the samples the rules use (the first two and the
/// last two), not every one: at k=64 a sample holds 327,680 ports.
pub const KEEP_ALL_UP_TO: usize = 256;

/// Samples in order, thinned at scale to the first two and the last two.
#[derive(Debug, Default)]
pub struct Samples {
    pub samples: Vec<Sample>,
    keep_all: bool,
}

impl Samples {
    pub fn new(switches: usize) -> Samples {
        Samples {
            samples: Vec::new(),
            keep_all: switches <= KEEP_ALL_UP_TO,
        }
    }
    pub fn push(&mut self, s: Sample) {
        if !self.keep_all && self.samples.len() >= 4 {
            self.samples.remove(2);
        }
        self.samples.push(s);
    }
}

/// What a window's sampling saw besides the samples.
#[derive(Debug, Clone, Default)]
pub struct Watched {
    /// Switches not judged in some sample, with the last reason.
    pub unjudged: BTreeMap<String, Unjudged>,
    /// Each sample's reading time.
    pub sweeps: Vec<Duration>,
}

/// Every switch's DBs every `interval` (at least 100 ms) for `window`, at least twice (a
/// window shorter than one interval is one interval).
pub async fn watch_db(t: &Topology, window: Duration, interval: Duration) -> (Window, Watched) {
    let mut r = db::Reader::new(t);
    let mut samples = Samples::new(t.switches.len());
    let mut w = Watched::default();
    let interval = interval.max(Duration::from_millis(100));
    let t0 = Instant::now();
    loop {
        let at = t0.elapsed();
        let sweep = r.sweep(crate::now_ms()).await;
        w.sweeps.push(t0.elapsed() - at);
        for u in sweep.unjudged {
            w.unjudged.insert(u.switch.clone(), u);
        }
        samples.push(Sample {
            t_ms: at.as_millis() as u64,
            switches: sweep.switches,
        });
        if samples.samples.len() >= 2 && t0.elapsed() >= window {
            break;
        }
        let next = interval.saturating_sub(t0.elapsed() - at);
        tokio::time::sleep(next).await;
    }
    (
        Window {
            fabric: crate::diagnose::fabric_of(t).into(),
            samples: samples.samples,
        },
        w,
    )
}

/// A window from `source`: sampled now from the DBs, or the last `window` from Prometheus.
pub async fn watch(
    t: &Topology,
    source: &Source,
    window: Duration,
    interval: Duration,
) -> Result<(Window, Watched), SourceError> {
    match source {
        // The switches' own DBs by the packed reader: one round trip per redis-server per
        // sample, judged current by the rule every reader uses.
        Source::Db => Ok(watch_db(t, window, interval).await),
        Source::Prometheus(url) => {
            let p = prometheus::Prometheus::new(url)?;
            let (w, unjudged) = p.window(t, window, crate::now_ms()).await?;
            Ok((
                w,
                Watched {
                    unjudged: unjudged
                        .into_iter()
                        .map(|u| (u.switch.clone(), u))
                        .collect(),
                    sweeps: Vec::new(),
                },
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse_and_a_bad_one_says_what_is_accepted() {
        assert_eq!("db".parse::<Source>(), Ok(Source::Db));
        assert_eq!(
            "prometheus=http://127.0.0.1:9090".parse::<Source>(),
            Ok(Source::Prometheus("http://127.0.0.1:9090".into()))
        );
        let e = "graphite=x".parse::<Source>().expect_err("refused");
        assert!(e.to_string().contains("use db or prometheus="), "{e}");
        assert!("prometheus=ftp://x".parse::<Source>().is_err());
    }

    #[test]
    fn at_scale_a_window_keeps_the_first_two_and_the_last_two_samples() {
        let mut s = Samples::new(KEEP_ALL_UP_TO + 1);
        for t in 0..10 {
            s.push(Sample {
                t_ms: t,
                switches: Default::default(),
            });
        }
        let kept: Vec<u64> = s.samples.iter().map(|x| x.t_ms).collect();
        assert_eq!(kept, vec![0, 1, 8, 9]);
        let mut all = Samples::new(6);
        for t in 0..5 {
            all.push(Sample {
                t_ms: t,
                switches: Default::default(),
            });
        }
        assert_eq!(all.samples.len(), 5);
    }
}
