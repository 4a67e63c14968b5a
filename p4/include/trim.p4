// Weft pipeline: packet trimming (Ultra Ethernet / SONiC "drop and trim"), in ingress, after the
// nexthop has chosen the egress port.
//
//   lossy packet ─ trim_config_table (keyless) ─ its queue trimmable on this egress port, the
//                  port's queue estimate >= threshold, longer than the trim size?
//                    no  ─> enqueued as it is
//                    yes ─> trim_packet: counted, re-marked to the trimmed DSCP, moved to the
//                           trimmed queue, IP/UDP lengths set to the trimmed size, UDP checksum
//                           0, truncated to the trimmed size on the wire
//
// The trimmed copy keeps Ethernet, IP, UDP, the BTH (QP, PSN, opcode) and, with a size of at
// least 90 bytes, the RETH: what the receiver needs to ask for exactly that packet again. It
// goes out on the trimmed queue, a strict-priority queue no class uses (validation sees to it),
// so it overtakes the queue that was too long.
//
// The queue estimate is queue_class_depth_reg (queue_state.p4): BMv2's deq_qdepth of the last
// packet that left the packet's own (port, queue). Not the per-port cell adaptive routing reads:
// deq_qdepth counts only the departing packet's priority queue, so each trimmed header leaving
// the (empty) trimmed queue would report 0 and stop trimming until the long queue sent again.
// BMv2 measures in packets, so the threshold is in packets; BMv2 tail-drops a
// priority queue at its capacity (64 by default), so the plugin sets the threshold below it.
//
// Cost: lossless packets skip all of this (one condition); other packets apply one keyless
// table whose action reads one register cell and compares; only trimmed packets run
// trim_packet.
#ifndef WEFT_TRIM_P4
#define WEFT_TRIM_P4

// meta.trim (set_trim_config): 0 = not trimmed; else size ++ 7w0 ++ queue ++ DSCP.
#define TRIM_SIZE meta.trim[31:16]
#define TRIM_QUEUE meta.trim[8:6]
#define TRIM_DSCP meta.trim[5:0]
#define ETHERNET_BYTES 14
#define IPV4_ETHERNET_BYTES 34
#define IPV6_ETHERNET_BYTES 54

control Trim(inout headers_t hdr,
             inout local_metadata_t meta,
             inout standard_metadata_t sm) {
    // Packets trimmed, index egress port * 8 + the class the packet had before trimming
    // (SAI_QUEUE_STAT_TRIM_PACKETS; summed over classes: SAI_PORT_STAT_TRIM_PACKETS).
    @id(ID_TRIM_COUNTER)
    counter(NUM_PORT_QUEUES, CounterType.packets) trim_counter;

    // Switch-wide trimming (a keyless table: the plugin modifies its default action), from
    // CONFIG_DB SWITCH_TRIMMING|GLOBAL and the queues whose buffer profile has
    // packet_discard_action "trim":
    //   trim_size   bytes the trimmed packet keeps, Ethernet header included
    //   trim_dscp   DSCP of the trimmed packet
    //   trim_queue  queue (= traffic class) of the trimmed packet
    //   threshold   packets: trim when the egress port's queue estimate is at least this
    //   queues      bit q set: packets of traffic class q are trimmable
    //   ports       bit p set: trimming is on for egress port p (ports < 256; higher ports never
    //               trim)
    // Default: no queue trimmable (trimming off).
    @id(ID_SET_TRIM_CONFIG)
    action set_trim_config(bit<16> trim_size, bit<6> trim_dscp, bit<3> trim_queue,
                           bit<32> threshold, bit<8> queues, bit<PORT_MASK_BITS> ports) {
        bit<19> depth;
        queue_class_depth_reg.read(depth, (bit<32>)sm.egress_spec * NUM_QUEUES
                                          + (bit<32>)sm.priority);
        meta.trim = (((queues >> sm.priority) & 1) == 1
                     && sm.egress_spec <= 255
                     && ((ports >> (bit<8>)sm.egress_spec) & 1) == 1
                     && (bit<32>)depth >= threshold
                     && sm.packet_length > (bit<32>)trim_size)
            ? trim_size ++ 7w0 ++ trim_queue ++ trim_dscp : 32w0;
    }

    @id(ID_TRIM_CONFIG_TABLE)
    @weft_owner("plugin", "packet trimming from CONFIG_DB SWITCH_TRIMMING and the queues whose BUFFER_PROFILE packet_discard_action is trim")
    table trim_config_table {
        actions = { set_trim_config; }
        default_action = set_trim_config(0, 0, 0, 0, 0, 0);
        size = TRIM_CONFIG_TABLE_SIZE;
    }

    // Both IP headers' fields are written: the one not valid is not sent (cheaper than a
    // condition). The UDP checksum no longer covers the payload: 0 is "no checksum" in IPv4,
    // and RoCEv2 receivers do not check it (a Linux IPv6 UDP socket needs UDP_NO_CHECK6_RX).
    @hidden action trim_packet() {
        trim_counter.count((bit<32>)sm.egress_spec * NUM_QUEUES + (bit<32>)sm.priority);
        sm.priority = TRIM_QUEUE;
        hdr.ipv4.dscp = TRIM_DSCP;
        hdr.ipv6.dscp = TRIM_DSCP;
        hdr.ipv4.total_len = TRIM_SIZE - ETHERNET_BYTES;
        hdr.ipv6.payload_len = TRIM_SIZE - IPV6_ETHERNET_BYTES;
        hdr.udp.length = TRIM_SIZE - (hdr.ipv4.isValid() ? (bit<16>)IPV4_ETHERNET_BYTES
                                                         : (bit<16>)IPV6_ETHERNET_BYTES);
        hdr.udp.checksum = 0;
        truncate((bit<32>)TRIM_SIZE);
    }

    apply {
        trim_config_table.apply();
        if (meta.trim != 0) {
            trim_packet();
        }
    }
}

#endif
