// Weft: the fabric pipeline (P4_16, v1model, BMv2 simple_switch_grpc).
//
// This file holds only the includes and the apply order; each feature is one control under
// include/. Tables, who writes them and the units of every parameter: README.md.
//
//  INGRESS
//  ───────
//  parser ─> PacketOut ──(from CPU: out the named port, done)
//            PortIngress     rx counters; port_config_table (router MAC), switch_config_table,
//                            port_status_table (down mask)
//            PfcRx           PFC frame? count per priority, consume, done
//            L3Admit         router MAC, IP only                                   ─┐ any drop
//            QosClassify     DSCP -> traffic class, lossless                        │ skips the
//            Routing         TTL check; ipv4_table / ipv6_table (LPM)               │ rest and is
//              │ group?                                                             │ counted by
//            Multipath       flow key + hash; mode; selector sample + last choice   │ DropStats
//              │             + flowlets; live ports only; least queue (adaptive)    │
//            Nexthop         nexthop_table: port, MACs; TTL-1; port live? priority  │
//            PfcWatchdog     (lossless) storm on (port, prio) -> drop               │
//            TelemetryIngress  (postcard session set) watch table / 1-in-N -> flag  ─┘
//            DropStats       drop_reason_counter
//                 │
//            [ BMv2 queue per (port, priority) ]
//                 │
//  EGRESS
//  ──────
//            PortEgress      tx counters; queue-depth register + histogram
//            PfcEgress       normal: xoff crossed -> clone PAUSE to the upstream port;
//                                    <= xon -> clone RESUME
//                            clone:  build the PFC frame
//            Ecn             ECT packets: RED-style CE marking from (port, queue) thresholds
//            PsnTracker      host-facing ports: RoCE PSN out-of-order / regression counters
//            TelemetryEgress normal: flagged -> clone to the postcard session
//                            clone:  build the postcard (packet-in on the CPU port)
//  ─> checksum (IPv4) ─> deparser
#include <core.p4>
#include <v1model.p4>

#include "include/sizes.p4"
#include "include/ids.p4"
#include "include/constants.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/queue_state.p4"
#include "include/port.p4"
#include "include/flow.p4"
#include "include/qos.p4"
#include "include/routing.p4"
#include "include/multipath.p4"
#include "include/nexthop.p4"
#include "include/pfc.p4"
#include "include/telemetry.p4"
#include "include/ecn.p4"
#include "include/psn.p4"
#include "include/port_egress.p4"

control ingress(inout headers_t hdr,
                inout local_metadata_t meta,
                inout standard_metadata_t sm) {
    PacketOut() cpu_out;
    PortIngress() port;
    PfcRx() pfc_rx;
    L3Admit() admit;
    QosClassify() qos;
    Routing() routing;
    Multipath() multipath;
    Nexthop() nexthop;
    PfcWatchdog() pfc_watchdog;
    TelemetryIngress() telemetry;
    DropStats() drops;

    apply {
        cpu_out.apply(hdr, meta, sm);
        port.apply(hdr, meta, sm);
        if (hdr.pfc.isValid()) {
            pfc_rx.apply(hdr, meta, sm);
        }
        admit.apply(hdr, meta, sm);
        if (meta.drop_reason == DROP_REASON_NONE) {
            qos.apply(hdr, meta, sm);
            routing.apply(hdr, meta, sm);
        }
        if (meta.drop_reason == DROP_REASON_NONE && meta.is_multipath == 1) {
            multipath.apply(hdr, meta, sm);
        }
        if (meta.drop_reason == DROP_REASON_NONE) {
            nexthop.apply(hdr, meta, sm);
        }
        if (meta.drop_reason == DROP_REASON_NONE && meta.lossless == 1) {
            pfc_watchdog.apply(hdr, meta, sm);
        }
        if (meta.drop_reason == DROP_REASON_NONE) {
            telemetry.apply(hdr, meta, sm);
        }
        drops.apply(hdr, meta, sm);
    }
}

control egress(inout headers_t hdr,
               inout local_metadata_t meta,
               inout standard_metadata_t sm) {
    PortEgress() port;
    PfcEgress() pfc;
    Ecn() ecn;
    PsnTracker() psn;
    TelemetryEgress() telemetry;

    apply {
        port.apply(hdr, meta, sm);
        if (meta.from_cpu == 0) {
            pfc.apply(hdr, meta, sm);
            if (sm.instance_type == INSTANCE_TYPE_NORMAL) {
                ecn.apply(hdr, meta, sm);
                psn.apply(hdr, meta, sm);
            }
            telemetry.apply(hdr, meta, sm);
        }
    }
}

V1Switch(WeftParser(),
         WeftVerifyChecksum(),
         ingress(),
         egress(),
         WeftComputeChecksum(),
         WeftDeparser()) main;
