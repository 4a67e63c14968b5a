// Weft pipeline: every size in one place.
//
// Table sizes are upper bounds for BMv2 (its tables grow on demand); counter and register sizes
// allocate memory up front, so they are kept to what the index really needs.
#ifndef WEFT_SIZES_P4
#define WEFT_SIZES_P4

// v1model ports are bit<9>: 512 port numbers. Every per-port array covers all of them, so no
// port id the control plane can express ever indexes out of range.
#define NUM_PORTS 512
// Ports the liveness mask covers (port_status_table): BMv2 limits a shift amount to 8 bits, so
// the mask is 256 bits and ports 256..511 always count as up.
#define PORT_MASK_BITS 256
// Queues per port: BMv2 `--priority-queues 8`, queue = priority = traffic class.
#define NUM_QUEUES 8
#define NUM_PORT_QUEUES 4096          // NUM_PORTS * NUM_QUEUES, index port * 8 + queue

#define PORT_CONFIG_TABLE_SIZE 512
#define IPV4_TABLE_SIZE 131072
#define IPV6_TABLE_SIZE 131072
#define MULTIPATH_MODE_TABLE_SIZE 8192
#define WCMP_GROUP_TABLE_SIZE 4096    // groups; also the size of the per-group register
#define WCMP_SELECTOR_SIZE 65536      // action-profile members, all groups together
#define WCMP_MAX_GROUP_SIZE 256       // sum of member weights in one group (P4Info max_group_size)
#define NEXTHOP_TABLE_SIZE 65536      // nexthop_id is bit<16>; also the member counter size
#define PFC_WATCHDOG_TABLE_SIZE 4096
#define POSTCARD_WATCH_TABLE_SIZE 256
#define QUEUE_CONFIG_TABLE_SIZE 4096  // (port, queue): NUM_PORT_QUEUES
#define PSN_TRACKING_TABLE_SIZE 512
#define TRIM_CONFIG_TABLE_SIZE 1      // keyless: the plugin modifies its default action

#define FLOWLET_SLOTS 65536           // power of two: the slot is flow_hash & (FLOWLET_SLOTS - 1)
#define PSN_SLOTS 4096                // RoCE QP tracking slots (hash of destination address + QP)
#define QDEPTH_HIST_BUCKETS 16        // histogram buckets per port, index port * 16 + bucket
#define NUM_QDEPTH_HIST 8192          // NUM_PORTS * QDEPTH_HIST_BUCKETS
#define DROP_REASON_COUNT 32

// Bytes kept of a postcard (packet_in + Ethernet + postcard + IPv6 + TCP or UDP + BTH fits).
#define POSTCARD_TRUNCATE_BYTES 160
// A PFC frame is 60 bytes on the wire without FCS (Ethernet 14 + MAC control 20 + pad 26).
#define PFC_FRAME_BYTES 60

#endif
