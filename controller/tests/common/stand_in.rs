//! Stand-in plugins for tests against real redis-servers without BMv2: a status row that says
//! "running, in sync", and a loop that answers every P4RT_TABLE key SUCCESS and mirrors it into
//! APPL_STATE_DB, as the real plugin does.

use std::time::Duration;

use weft_sonic_db::{
    ConsumerStateTable, EntryResult, ResponsePublisher, SonicDb, SonicDbId, Table,
};
use weft_sonic_schema::Row;
use weft_sonic_schema::state::{PluginState, PluginStatus};

pub fn status_row(installed: u64) -> PluginStatus {
    PluginStatus {
        name: "status".into(),
        state: PluginState::Running,
        pid: std::process::id(),
        device_id: 0,
        p4rt: "stand-in".into(),
        pipeline_cookie: weft_p4rt::cookie(weft_p4::P4INFO_BINARY, weft_p4::BMV2_JSON.as_bytes()),
        switch_updates: 0,
        batches: 0,
        keys_ok: 0,
        keys_failed: 0,
        syncs: 1,
        last_sync_updates: 0,
        sync_failures: 0,
        installed_keys: installed,
        pending_keys: 0,
        sessions: 1,
        pipeline_pushes: 0,
        redis_restores: 0,
        ports_down: 0,
        port_mask_writes: 0,
        link_events: 0,
        pfc_wd_storms: 0,
        counter_polls: 0,
        uptime_s: 1,
        updated_ms: 0,
    }
}

/// Answers every key SUCCESS and mirrors it into APPL_STATE_DB, as a plugin does.
pub async fn stand_in(url: String) {
    let Ok(sonic) = SonicDb::from_endpoint(&url) else {
        return;
    };
    let Ok(mut consumer) = ConsumerStateTable::new(&sonic, SonicDbId::ApplDb, "P4RT_TABLE").await
    else {
        return;
    };
    consumer.set_poll_interval(Duration::from_millis(20));
    let Ok(mut publisher) = ResponsePublisher::new(&sonic, "P4RT_TABLE").await else {
        return;
    };
    let (Ok(state), Ok(appl_state)) = (
        sonic.connect(SonicDbId::StateDb).await,
        sonic.connect(SonicDbId::ApplStateDb).await,
    ) else {
        return;
    };
    let (Ok(table), Ok(mirror)) = (
        Table::new(state, PluginStatus::TABLE),
        Table::new(appl_state, "P4RT_TABLE"),
    ) else {
        return;
    };
    let mut installed = 0u64;
    let st = status_row(0);
    if table.replace(&st.key(), &st.to_fields()).await.is_err() {
        return;
    }
    while let Ok(batch) = consumer.next_batch(1024).await {
        let mut results = Vec::new();
        for k in batch {
            let ok = match k.op {
                weft_sonic_db::Op::Set => mirror.replace(&k.key, &k.fields).await,
                weft_sonic_db::Op::Del => mirror.del(&k.key).await,
            };
            if ok.is_err() {
                return;
            }
            results.push(EntryResult::ok(k.key, k.op, k.fields));
        }
        if publisher.publish_batch(&results).await.is_err() {
            return;
        }
        installed = mirror.dump().await.map_or(installed, |d| d.len() as u64);
        let st = status_row(installed);
        if table.replace(&st.key(), &st.to_fields()).await.is_err() {
            return;
        }
    }
}
