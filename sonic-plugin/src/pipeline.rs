//! What the plugin knows specifically about Weft's pipeline (p4/README.md): the write order of
//! the tables and which tables it programs itself. Both come from the table contract generated
//! from the P4 source's `@refers_to` and `@weft_owner` declarations (`weft_p4::contract`), the
//! same the controller orders its writes by.

use std::collections::BTreeMap;

use weft_p4::contract;
use weft_p4rt::{P4Info, PipelineConfig};

use crate::config::PipelineSource;
use crate::objects::{ObjKey, Ranker};

/// Write ranks of the pipeline's objects (`weft_p4::tables::<t>::WRITE_RANK`, and the members'
/// and groups' ranks of each action profile): for Weft's pipeline port config 0 → nexthops 1 →
/// members 2 → groups 3 → `wcmp_group_table` 4 → multipath mode 5 → routes 6.
#[derive(Debug, Clone)]
pub struct Contract {
    // Looked up once per planned update.
    tables: foldhash::HashMap<u32, u8>,
    profiles: foldhash::HashMap<u32, (u8, u8)>,
}

impl Default for Contract {
    fn default() -> Self {
        Contract {
            tables: contract::tables()
                .iter()
                .map(|t| (t.id, t.write_rank))
                .collect(),
            profiles: weft_p4::action_profiles::RANKS
                .iter()
                .map(|(id, member, group)| (*id, (*member, *group)))
                .collect(),
        }
    }
}

impl Ranker for Contract {
    fn rank(&self, key: &ObjKey) -> u8 {
        // Unknown tables and profiles go last: whatever they refer to is then in place.
        let last = contract::MAX_WRITE_RANK;
        match key {
            ObjKey::Member { profile_id, .. } => {
                self.profiles.get(profile_id).map_or(last, |(m, _)| *m)
            }
            ObjKey::Group { profile_id, .. } => {
                self.profiles.get(profile_id).map_or(last, |(_, g)| *g)
            }
            // Clone sessions and default actions refer to no entry.
            ObjKey::CloneSession { .. } | ObjKey::Default { .. } => 0,
            ObjKey::Entry { table_id, .. } => self.tables.get(table_id).copied().unwrap_or(last),
        }
    }
}

/// Tables the plugin writes itself (`@weft_owner("plugin", why)`), with the reason a
/// P4RT_TABLE writer is told.
pub fn owned_tables() -> BTreeMap<u32, &'static str> {
    contract::plugin_tables().collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use weft_p4::{action_profiles as ap, tables as t};

    fn entry(table_id: u32) -> ObjKey {
        ObjKey::Entry {
            table_id,
            matches: Vec::new(),
            priority: 0,
        }
    }

    #[test]
    fn every_table_of_the_p4info_has_the_generated_rank() {
        let c = Contract::default();
        let info = weft_p4info().expect("p4info");
        for table in info.tables() {
            let generated = contract::table(table.id).map(|x| x.write_rank);
            assert_eq!(Some(c.rank(&entry(table.id))), generated, "{}", table.name);
        }
    }

    #[test]
    fn the_order_runs_nexthops_members_groups_group_table_modes_routes() {
        let c = Contract::default();
        let p = ap::wcmp_group_selector::ID;
        let order = [
            c.rank(&entry(t::port_config_table::ID)),
            c.rank(&entry(t::nexthop_table::ID)),
            c.rank(&ObjKey::Member {
                profile_id: p,
                member_id: 1,
            }),
            c.rank(&ObjKey::Group {
                profile_id: p,
                group_id: 1,
            }),
            c.rank(&entry(t::wcmp_group_table::ID)),
            c.rank(&entry(t::multipath_mode_table::ID)),
            c.rank(&entry(t::ipv4_table::ID)),
        ];
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
        // The table that used to have no rank: PSN tracking refers to nothing.
        assert_eq!(c.rank(&entry(t::psn_tracking_table::ID)), 0);
        assert_eq!(c.rank(&entry(0x02ff_ffff)), contract::MAX_WRITE_RANK);
    }

    #[test]
    fn owned_tables_are_the_plugin_annotated_ones() {
        let owned = owned_tables();
        assert_eq!(
            owned.get(&t::queue_config_table::ID).copied(),
            Some("from CONFIG_DB WRED_PROFILE, QUEUE, BUFFER_PG, BUFFER_PROFILE and PORT_QOS_MAP")
        );
        assert!(!owned.contains_key(&t::nexthop_table::ID));
        let info = weft_p4info().expect("p4info");
        for table in info.tables() {
            let plugin = matches!(table.owner, Some(weft_p4rt::Owner::Plugin { .. }));
            assert_eq!(owned.contains_key(&table.id), plugin, "{}", table.name);
        }
    }
}
