//! The values a fabric gets where the intent says nothing.

use crate::model::{DscpKeyword, DscpSet, TrafficClassSpec};
use crate::units::{Duration, Length, Speed};

pub const DEFAULT_SPEED: Speed = Speed::gbps(100);
pub const DEFAULT_MTU: u32 = 9100;
pub const DEFAULT_CABLE: Length = Length::metres(5);
pub const DEFAULT_HOST_CABLE: Length = Length::metres(2);
pub const DEFAULT_P4RT_ADDRESS: &str = "127.0.0.1:9559";
pub const DEFAULT_DB_SOCKET_DIR: &str = "/run/weft";
pub const DEFAULT_FLOWLET_GAP: Duration = Duration::micros(100);
/// Device ids stay within 32 bits so that the testbed's interface names `s<device>p<port>` fit
/// Linux's 15 characters.
pub const MAX_DEVICE_ID: u64 = u32::MAX as u64;

/// The intent's default `telemetry.sample`: a postcard for 1 in 1000 packets.
pub const DEFAULT_POSTCARD_SAMPLE: u32 = 1000;

/// Most watched flows the pipeline's postcard_watch_table holds.
pub const MAX_WATCHED_FLOWS: usize = 256; // p4/include/sizes.p4 POSTCARD_WATCH_TABLE_SIZE (the compiler asserts it)

/// RoCE lossless on traffic class 3 (DSCP 26), CNPs on 6 (DSCP 48), everything else lossy on 0.
pub(super) fn default_classes() -> Vec<TrafficClassSpec> {
    vec![
        TrafficClassSpec {
            name: "roce".into(),
            dscp: DscpSet::Values(vec![26]),
            traffic_class: 3,
            lossless: Some(true),
            ecn: None,
            trim: None,
        },
        TrafficClassSpec {
            name: "cnp".into(),
            dscp: DscpSet::Values(vec![48]),
            traffic_class: 6,
            lossless: Some(false),
            ecn: None,
            trim: None,
        },
        TrafficClassSpec {
            name: "default".into(),
            dscp: DscpSet::Keyword(DscpKeyword::Default),
            traffic_class: 0,
            lossless: Some(false),
            ecn: None,
            trim: None,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::super::testing::{SMALL, valid};
    use super::*;

    #[test]
    fn a_fabric_that_says_nothing_gets_the_defaults() {
        let t = valid(SMALL);
        assert_eq!(t.mtu, DEFAULT_MTU);
        assert!(t.links.iter().all(|l| l.speed == DEFAULT_SPEED));
        assert!(t.links.iter().all(|l| l.cable_length == DEFAULT_CABLE));
        assert!(t.hosts.iter().all(|h| h.cable_length == DEFAULT_CABLE));
        assert_eq!(t.switches[0].p4rt_address, DEFAULT_P4RT_ADDRESS);
        let classes: Vec<(&str, u8, bool)> = t
            .qos
            .classes
            .iter()
            .map(|c| (c.name.as_str(), c.traffic_class, c.lossless))
            .collect();
        assert_eq!(
            classes,
            vec![("roce", 3, true), ("cnp", 6, false), ("default", 0, false)]
        );
        assert_eq!(t.qos.classes[0].dscp, vec![26]);
        assert_eq!(t.qos.classes[0].flowlet_gap, DEFAULT_FLOWLET_GAP);
    }
}
