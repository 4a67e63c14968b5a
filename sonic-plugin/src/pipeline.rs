//! What the plugin knows specifically about Weft's pipeline (p4/README.md): the write order of
//! the tables and which tables it programs itself. Names and ids come from `weft_p4`'s
//! generated constants only.

use std::collections::{BTreeMap, HashMap};

use weft_p4::tables as t;
use weft_p4rt::{P4Info, PipelineConfig};

use crate::config::PipelineSource;
use crate::objects::{ObjKey, Ranker};

/// Ranks of p4/README.md's insert order: port config → nexthops → members → groups → both
/// wcmp tables → multipath mode → routes.
pub const RANK_BASE: u8 = 0;
pub const RANK_NEXTHOP: u8 = 1;
pub const RANK_MEMBER: u8 = 2;
pub const RANK_GROUP: u8 = 3;
pub const RANK_GROUP_TABLE: u8 = 4;
pub const RANK_MODE: u8 = 5;
pub const RANK_ROUTE: u8 = 6;

#[derive(Debug, Clone)]
pub struct Contract {
    ranks: HashMap<u32, u8>,
}

impl Default for Contract {
    fn default() -> Self {
        let ranks = [
            (t::port_config_table::ID, RANK_BASE),
            (t::nexthop_table::ID, RANK_NEXTHOP),
            (t::wcmp_group_table::ID, RANK_GROUP_TABLE),
            (t::multipath_mode_table::ID, RANK_MODE),
            (t::ipv4_table::ID, RANK_ROUTE),
            (t::ipv6_table::ID, RANK_ROUTE),
        ]
        .into_iter()
        .collect();
        Contract { ranks }
    }
}

impl Ranker for Contract {
    fn rank(&self, key: &ObjKey) -> u8 {
        match key {
            ObjKey::Member { .. } => RANK_MEMBER,
            ObjKey::Group { .. } => RANK_GROUP,
            ObjKey::CloneSession { .. } | ObjKey::Default { .. } => RANK_BASE,
            ObjKey::Entry { table_id, .. } => {
                // Unknown tables go last: whatever they refer to is then in place.
                self.ranks.get(table_id).copied().unwrap_or(RANK_ROUTE)
            }
        }
    }
}

/// Tables the plugin writes itself, with the reason a P4RT_TABLE writer is told.
pub fn owned_tables() -> BTreeMap<u32, &'static str> {
    [
        (t::switch_config_table::ID, "switch_id = device id"),
        (t::port_status_table::ID, "port down mask from link state"),
        (
            t::qos_classify_table::ID,
            "from CONFIG_DB DSCP_TO_TC_MAP and PORT_QOS_MAP",
        ),
        (
            t::ecn_threshold_table::ID,
            "from CONFIG_DB WRED_PROFILE and QUEUE",
        ),
        (
            t::pfc_threshold_table::ID,
            "from CONFIG_DB BUFFER_PG, BUFFER_PROFILE and PORT_QOS_MAP",
        ),
        (t::pfc_watchdog_table::ID, "the plugin's PFC watchdog"),
    ]
    .into_iter()
    .collect()
}

/// Errors loading the pipeline.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    P4rt(#[from] weft_p4rt::Error),
}

/// The pipeline to push and its P4Info index.
pub fn load(source: &PipelineSource) -> Result<PipelineConfig, PipelineError> {
    Ok(match source {
        PipelineSource::Embedded => PipelineConfig::new(
            weft_p4::P4INFO_BINARY,
            weft_p4::BMV2_JSON.as_bytes().to_vec(),
        )?,
        PipelineSource::Files { p4info, bmv2_json } => {
            PipelineConfig::from_files(p4info, bmv2_json)?
        }
    })
}

/// Weft's own P4Info (for tests and tools).
pub fn weft_p4info() -> Result<P4Info, PipelineError> {
    Ok(P4Info::from_bytes(weft_p4::P4INFO_BINARY)?)
}
