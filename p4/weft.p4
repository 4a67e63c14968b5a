// Weft: the fabric pipeline (P4_16, v1model, BMv2 simple_switch_grpc).
//
// This file holds only the includes and the apply order; each feature is one control under
// include/. Tables, who writes them and the units of every parameter: README.md.
//
//  INGRESS                                       (the fast path, one condition per line: ?)
//  ───────
//  parser      resubmit: ingress port back; VLAN: PCP = class, tag off; IPv4/IPv6: DSCP
//  PortIngress port_config_table: rx count, router MAC
//              switch_config_table: settings, hash seed, DSCP -> class (qos.p4), watchdog ports
//              port_status_table: down mask
//  ? ROUTABLE  configured port, router MAC, IP, TTL > 1 ─┐ no: packet-out (out the named port,
//  Routing       ipv4_table / ipv6_table (LPM)            │ done), PFC frame (count, to the
//                                                         │ CPU as packet-in, done), or
//                                                         │ L3Admit (drop with reason)
//  ? group     Multipath: mode + flow hash + selector key; flowlets; sample (HASH/SPRAY live:
//                done); memory + least queue (adaptive, fallback); retry or drop
//  Nexthop     nexthop_table: port (down: drop), MACs, TTL-1
//  ? lossy     Trim: trim_config_table (keyless): trimmable queue, port estimate over the
//                threshold -> count, re-mark, trimmed queue, truncate
//  ? watchdog  PfcWatchdog (lossless, egress port with watchdog entries): storm -> drop
//  ? postcards TelemetryIngress (postcard session set): flow key, watch table, 1-in-N
//  ? dropped   DropStats: drop_reason_counter
//                 │
//            [ BMv2 queue per (port, priority) ]
//                 │
//  EGRESS
//  ──────
//  ? normal    PortEgress queue_config_table (port, queue): tx counters, depth register and
//                histogram, ECN thresholds, PFC state ─ else: tx counter (packet-out, clones)
//  ? ECN due   Ecn: ECT above Kmin: RED-style CE marking
//  ? PFC due   PfcEgress: clone PAUSE/RESUME toward the upstream port
//  ? BTH       PsnTracker: host-facing ports: RoCE PSN out-of-order / regression counters
//  ? postcard  TelemetryEgress: flagged -> clone to the postcard session
//  clones      PFC frame (PfcEgress) or postcard (TelemetryEgress, packet-in on the CPU port)
//  ─> IPv4 checksum ─> deparser
//
// Every table hit, table miss, condition and action primitive costs BMv2 per packet (a hit the
// most: it formats the entry for a log line even with logging off), so the fast path applies
// only tables that hold data for this packet and each feature is one condition when it has
// nothing to do; see p4/README.md, "Packet rate".
#include <core.p4>
#include <v1model.p4>

#include "include/sizes.p4"
#include "include/ids.p4"
#include "include/constants.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/queue_state.p4"
#include "include/qos.p4"
#include "include/port.p4"
#include "include/flow.p4"
#include "include/routing.p4"
#include "include/multipath.p4"
#include "include/nexthop.p4"
#include "include/pfc.p4"
#include "include/trim.p4"
#include "include/telemetry.p4"
#include "include/ecn.p4"
#include "include/psn.p4"
#include "include/port_egress.p4"

control ingress(inout headers_t hdr,
                inout local_metadata_t meta,
                inout standard_metadata_t sm) {
    PortIngress() port;
    PacketOut() cpu_out;
    PfcRx() pfc_rx;
    L3Admit() admit;
    Routing() routing;
    Multipath() multipath;
    Nexthop() nexthop;
    Trim() trim;
    PfcWatchdog() pfc_watchdog;
    TelemetryIngress() telemetry;
    DropStats() drops;

    apply {
        port.apply(hdr, meta, sm);
        if (ROUTABLE) {
            routing.apply(hdr, meta, sm);
        } else if (hdr.packet_out.isValid()) {
            cpu_out.apply(hdr, meta, sm);
        } else if (hdr.pfc.isValid()) {
            pfc_rx.apply(hdr, meta, sm);
        } else {
            admit.apply(hdr, meta, sm);
        }
        if (meta.wcmp_group_id != 0) {
            multipath.apply(hdr, meta, sm);
        }
        nexthop.apply(hdr, meta, sm);
        if (meta.lossless == 0 && sm.egress_spec != DROP_PORT) {
            trim.apply(hdr, meta, sm);
        }
        // Ports above 255 are not in the mask: they always look the table up.
        if (meta.lossless == 1 && sm.egress_spec != DROP_PORT
                && (sm.egress_spec > 255
                    || ((meta.watchdog_ports >> (bit<8>)sm.egress_spec) & 1) == 1)) {
            pfc_watchdog.apply(hdr, meta, sm);
        }
        if (SWITCH_CFG_POSTCARD_SESSION != 0) {
            telemetry.apply(hdr, meta, sm);
        }
        if (sm.egress_spec == DROP_PORT) {
            drops.apply(hdr, meta, sm);
        }
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
        if (meta.from_cpu == 0 && sm.instance_type == INSTANCE_TYPE_NORMAL) {
            if (ECN_DUE) {
                ecn.apply(hdr, meta, sm);
            }
            if (meta.pfc_event != 0) {
                pfc.apply(hdr, meta, sm);
            }
            if (hdr.bth.isValid()) {
                psn.apply(hdr, meta, sm);
            }
            if (meta.postcard_flags != 0 && meta.clone_kind == CLONE_KIND_NONE) {
                telemetry.apply(hdr, meta, sm);
            }
        } else if (meta.clone_kind == CLONE_KIND_PFC) {
            pfc.apply(hdr, meta, sm);
        } else if (meta.clone_kind == CLONE_KIND_POSTCARD) {
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
