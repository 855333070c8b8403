/*
 * fixturegen: byte-exact SMP attribute fixtures for ibsm's wire tests.
 *
 *   fixturegen gen <dir>       encode chosen field values with libibmad
 *                              (mad_set_field/mad_set_field64/mad_set_array)
 *                              into <dir>/<attr>_<case>.hex + .fields
 *   fixturegen capture <dir>   query a running ibsim (through umad2sim) with
 *                              smp_query_via and store the returned attribute
 *                              data as <dir>/ibsim_<attr>_<path>.hex, with
 *                              the fields libibmad decodes from it in .fields
 *
 * .hex files hold the 64-byte SMP data area, 16 bytes per line. .fields files
 * hold one `name=value` per line, named as ibsm's Repr fields; every field of
 * the attribute is listed. The table attributes that libibmad treats as plain
 * byte arrays (LFT, P_KeyTable, MFT, SLtoVL, VLArb) are encoded here by hand
 * from the IBA layout, so they are still independent of ibsm's Rust code.
 *
 * Rebuild everything with tools/fixturegen/regen.sh; the Rust tests only read
 * the committed files.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <stdarg.h>
#include <infiniband/mad.h>

#define DATA_LEN 64

static const char *outdir;

struct fld {
	int f;		/* libibmad field */
	const char *name;	/* ibsm Repr field name */
	int bits;
};

static const struct fld node_info[] = {
	{IB_NODE_BASE_VERS_F, "base_version", 8},
	{IB_NODE_CLASS_VERS_F, "class_version", 8},
	{IB_NODE_TYPE_F, "node_type", 8},
	{IB_NODE_NPORTS_F, "num_ports", 8},
	{IB_NODE_SYSTEM_GUID_F, "system_image_guid", 64},
	{IB_NODE_GUID_F, "node_guid", 64},
	{IB_NODE_PORT_GUID_F, "port_guid", 64},
	{IB_NODE_PARTITION_CAP_F, "partition_cap", 16},
	{IB_NODE_DEVID_F, "device_id", 16},
	{IB_NODE_REVISION_F, "revision", 32},
	{IB_NODE_LOCAL_PORT_F, "local_port_num", 8},
	{IB_NODE_VENDORID_F, "vendor_id", 24},
	{0, NULL, 0}
};

static const struct fld port_info[] = {
	{IB_PORT_MKEY_F, "m_key", 64},
	{IB_PORT_GID_PREFIX_F, "gid_prefix", 64},
	{IB_PORT_LID_F, "lid", 16},
	{IB_PORT_SMLID_F, "master_sm_lid", 16},
	{IB_PORT_CAPMASK_F, "capability_mask", 32},
	{IB_PORT_DIAG_F, "diag_code", 16},
	{IB_PORT_MKEY_LEASE_F, "m_key_lease_period", 16},
	{IB_PORT_LOCAL_PORT_F, "local_port_num", 8},
	{IB_PORT_LINK_WIDTH_ENABLED_F, "link_width_enabled", 8},
	{IB_PORT_LINK_WIDTH_SUPPORTED_F, "link_width_supported", 8},
	{IB_PORT_LINK_WIDTH_ACTIVE_F, "link_width_active", 8},
	{IB_PORT_LINK_SPEED_SUPPORTED_F, "link_speed_supported", 4},
	{IB_PORT_STATE_F, "port_state", 4},
	{IB_PORT_PHYS_STATE_F, "port_physical_state", 4},
	{IB_PORT_LINK_DOWN_DEF_F, "link_down_default_state", 4},
	{IB_PORT_MKEY_PROT_BITS_F, "m_key_protect_bits", 2},
	{IB_PORT_LMC_F, "lmc", 3},
	{IB_PORT_LINK_SPEED_ACTIVE_F, "link_speed_active", 4},
	{IB_PORT_LINK_SPEED_ENABLED_F, "link_speed_enabled", 4},
	{IB_PORT_NEIGHBOR_MTU_F, "neighbor_mtu", 4},
	{IB_PORT_SMSL_F, "master_sm_sl", 4},
	{IB_PORT_VL_CAP_F, "vl_cap", 4},
	{IB_PORT_INIT_TYPE_F, "init_type", 4},
	{IB_PORT_VL_HIGH_LIMIT_F, "vl_high_limit", 8},
	{IB_PORT_VL_ARBITRATION_HIGH_CAP_F, "vl_arbitration_high_cap", 8},
	{IB_PORT_VL_ARBITRATION_LOW_CAP_F, "vl_arbitration_low_cap", 8},
	{IB_PORT_INIT_TYPE_REPLY_F, "init_type_reply", 4},
	{IB_PORT_MTU_CAP_F, "mtu_cap", 4},
	{IB_PORT_VL_STALL_COUNT_F, "vl_stall_count", 3},
	{IB_PORT_HOQ_LIFE_F, "hoq_life", 5},
	{IB_PORT_OPER_VLS_F, "operational_vls", 4},
	{IB_PORT_PART_EN_INB_F, "partition_enforcement_inbound", 1},
	{IB_PORT_PART_EN_OUTB_F, "partition_enforcement_outbound", 1},
	{IB_PORT_FILTER_RAW_INB_F, "filter_raw_inbound", 1},
	{IB_PORT_FILTER_RAW_OUTB_F, "filter_raw_outbound", 1},
	{IB_PORT_MKEY_VIOL_F, "m_key_violations", 16},
	{IB_PORT_PKEY_VIOL_F, "p_key_violations", 16},
	{IB_PORT_QKEY_VIOL_F, "q_key_violations", 16},
	{IB_PORT_GUID_CAP_F, "guid_cap", 8},
	{IB_PORT_CLIENT_REREG_F, "client_reregister", 1},
	{IB_PORT_MCAST_PKEY_SUPR_ENAB_F, "multicast_pkey_trap_suppression_enabled", 2},
	{IB_PORT_SUBN_TIMEOUT_F, "subnet_timeout", 5},
	{IB_PORT_RESP_TIME_VAL_F, "resp_time_value", 5},
	{IB_PORT_LOCAL_PHYS_ERR_F, "local_phy_errors", 4},
	{IB_PORT_OVERRUN_ERR_F, "overrun_errors", 4},
	{IB_PORT_MAX_CREDIT_HINT_F, "max_credit_hint", 16},
	{IB_PORT_LINK_ROUND_TRIP_F, "link_round_trip_latency", 24},
	{IB_PORT_CAPMASK2_F, "capability_mask2", 16},
	{IB_PORT_LINK_SPEED_EXT_ACTIVE_F, "link_speed_ext_active", 4},
	{IB_PORT_LINK_SPEED_EXT_SUPPORTED_F, "link_speed_ext_supported", 4},
	{IB_PORT_LINK_SPEED_EXT_ENABLED_F, "link_speed_ext_enabled", 5},
	{0, NULL, 0}
};

static const struct fld switch_info[] = {
	{IB_SW_LINEAR_FDB_CAP_F, "linear_fdb_cap", 16},
	{IB_SW_RANDOM_FDB_CAP_F, "random_fdb_cap", 16},
	{IB_SW_MCAST_FDB_CAP_F, "multicast_fdb_cap", 16},
	{IB_SW_LINEAR_FDB_TOP_F, "linear_fdb_top", 16},
	{IB_SW_DEF_PORT_F, "default_port", 8},
	{IB_SW_DEF_MCAST_PRIM_F, "default_mcast_primary_port", 8},
	{IB_SW_DEF_MCAST_NOT_PRIM_F, "default_mcast_not_primary_port", 8},
	{IB_SW_LIFE_TIME_F, "life_time_value", 5},
	{IB_SW_STATE_CHANGE_F, "port_state_change", 1},
	{IB_SW_OPT_SLTOVL_MAPPING_F, "optimized_sl_to_vl_mapping_programming", 2},
	{IB_SW_LIDS_PER_PORT_F, "lids_per_port", 16},
	{IB_SW_PARTITION_ENFORCE_CAP_F, "partition_enforcement_cap", 16},
	{IB_SW_PARTITION_ENF_INB_F, "inbound_enforcement_cap", 1},
	{IB_SW_PARTITION_ENF_OUTB_F, "outbound_enforcement_cap", 1},
	{IB_SW_FILTER_RAW_INB_F, "filter_raw_inbound_cap", 1},
	{IB_SW_FILTER_RAW_OUTB_F, "filter_raw_outbound_cap", 1},
	{IB_SW_ENHANCED_PORT0_F, "enhanced_port0", 1},
	{IB_SW_MCAST_FDB_TOP_F, "multicast_fdb_top", 16},
	{0, NULL, 0}
};

static const struct fld sm_info[] = {
	{IB_SMINFO_GUID_F, "guid", 64},
	{IB_SMINFO_KEY_F, "sm_key", 64},
	{IB_SMINFO_ACT_F, "act_count", 32},
	{IB_SMINFO_PRIO_F, "priority", 4},
	{IB_SMINFO_STATE_F, "sm_state", 4},
	{0, NULL, 0}
};

/* NoticeCount comes before NoticeToggle: libibmad's count field is 16 bits
 * wide and would clear the toggle bit if written after it. */
static const struct fld notice[] = {
	{IB_NOTICE_IS_GENERIC_F, "is_generic", 1},
	{IB_NOTICE_TYPE_F, "notice_type", 7},
	{IB_NOTICE_PRODUCER_F, "producer_type", 24},
	{IB_NOTICE_TRAP_NUMBER_F, "trap_number", 16},
	{IB_NOTICE_ISSUER_LID_F, "issuer_lid", 16},
	{IB_NOTICE_COUNT_F, "notice_count", 15},
	{IB_NOTICE_TOGGLE_F, "notice_toggle", 1},
	{0, NULL, 0}
};

static const struct fld guid_info[] = {
	{IB_GI_GUID0_F, "guids[0]", 64},
	{IB_GI_GUID1_F, "guids[1]", 64},
	{IB_GI_GUID2_F, "guids[2]", 64},
	{IB_GI_GUID3_F, "guids[3]", 64},
	{IB_GI_GUID4_F, "guids[4]", 64},
	{IB_GI_GUID5_F, "guids[5]", 64},
	{IB_GI_GUID6_F, "guids[6]", 64},
	{IB_GI_GUID7_F, "guids[7]", 64},
	{0, NULL, 0}
};

#define MAXF 64

static uint64_t mask_of(int bits)
{
	return bits >= 64 ? ~0ULL : ((1ULL << bits) - 1);
}

static FILE *open_out(const char *base, const char *ext)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/%s.%s", outdir, base, ext);
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	return f;
}

static void write_hex(const char *base, const uint8_t *buf, int len)
{
	FILE *f = open_out(base, "hex");
	for (int i = 0; i < len; i++)
		fprintf(f, "%02x%s", buf[i], (i % 16 == 15 || i == len - 1) ? "\n" : "");
	fclose(f);
}

/* Encodes vals[] into buf with libibmad, in table order. */
static void encode(uint8_t *buf, const struct fld *t, const uint64_t *vals)
{
	for (int i = 0; t[i].name; i++) {
		if (t[i].bits > 32)
			mad_set_field64(buf, 0, t[i].f, vals[i]);
		else
			mad_set_field(buf, 0, t[i].f, (uint32_t)vals[i]);
	}
}

static void write_fields(FILE *f, const struct fld *t, const uint64_t *vals)
{
	for (int i = 0; t[i].name; i++)
		fprintf(f, "%s=0x%llx\n", t[i].name, (unsigned long long)vals[i]);
}

/* Writes one libibmad-encoded case; `extra` may append attribute-specific
 * lines (and bytes) after the table fields are encoded. */
static void emit_case(const char *attr, const char *cas, const struct fld *t,
		      const uint64_t *vals,
		      void (*extra)(uint8_t *buf, FILE *f, const void *arg),
		      const void *arg)
{
	uint8_t buf[DATA_LEN] = {0};
	char base[256];
	snprintf(base, sizeof base, "%s_%s", attr, cas);
	encode(buf, t, vals);
	FILE *f = open_out(base, "fields");
	fprintf(f, "# %s case %s: encoded by libibmad (fixturegen gen)\n", attr, cas);
	write_fields(f, t, vals);
	if (extra)
		extra(buf, f, arg);
	fclose(f);
	write_hex(base, buf, DATA_LEN);
}

/* Every field all ones. */
static void all_ones(const struct fld *t, uint64_t *vals)
{
	for (int i = 0; t[i].name; i++)
		vals[i] = mask_of(t[i].bits);
}

/* A different, non-trivial value in every field, so a field read from its
 * neighbour's bits shows up as a mismatch. */
static void pattern(const struct fld *t, uint64_t *vals, uint64_t seed)
{
	uint64_t x = seed;
	for (int i = 0; t[i].name; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		uint64_t v = (x >> 7) & mask_of(t[i].bits);
		if (v == 0 || v == mask_of(t[i].bits))
			v = t[i].bits == 1 ? (i & 1) : (v ^ 1) & mask_of(t[i].bits);
		vals[i] = v;
	}
}

static int idx(const struct fld *t, const char *name)
{
	for (int i = 0; t[i].name; i++)
		if (!strcmp(t[i].name, name))
			return i;
	fprintf(stderr, "no field %s\n", name);
	exit(1);
}

#define SET(t, v, name, val) ((v)[idx((t), (name))] = (val))

static void gen_node_info(void)
{
	uint64_t v[MAXF];
	const struct fld *t = node_info;

	memset(v, 0, sizeof v);
	SET(t, v, "base_version", 1);
	SET(t, v, "class_version", 1);
	SET(t, v, "node_type", 2);
	SET(t, v, "num_ports", 36);
	SET(t, v, "system_image_guid", 0x0002c90300a1b2c3ULL);
	SET(t, v, "node_guid", 0x0002c90300a1b2c3ULL);
	SET(t, v, "port_guid", 0x0002c90300a1b2c3ULL);
	SET(t, v, "partition_cap", 8);
	SET(t, v, "device_id", 0xcb20);
	SET(t, v, "revision", 0xa2);
	SET(t, v, "local_port_num", 17);
	SET(t, v, "vendor_id", 0x0002c9);
	emit_case("nodeinfo", "switch", t, v, NULL, NULL);

	memset(v, 0, sizeof v);
	SET(t, v, "base_version", 1);
	SET(t, v, "class_version", 1);
	SET(t, v, "node_type", 1);
	SET(t, v, "num_ports", 2);
	SET(t, v, "system_image_guid", 0);
	SET(t, v, "node_guid", 0xe41d2d0300112233ULL);
	SET(t, v, "port_guid", 0xe41d2d0300112235ULL);
	SET(t, v, "partition_cap", 128);
	SET(t, v, "device_id", 0x1017);
	SET(t, v, "revision", 0);
	SET(t, v, "local_port_num", 2);
	SET(t, v, "vendor_id", 0xe41d2d);
	emit_case("nodeinfo", "ca", t, v, NULL, NULL);

	/* A reserved node type and zero ports: legal to parse. */
	memset(v, 0, sizeof v);
	SET(t, v, "node_type", 0);
	emit_case("nodeinfo", "zeros", t, v, NULL, NULL);

	all_ones(t, v);
	emit_case("nodeinfo", "allones", t, v, NULL, NULL);
	pattern(t, v, 11);
	emit_case("nodeinfo", "pattern", t, v, NULL, NULL);
}

static void gen_port_info(void)
{
	uint64_t v[MAXF];
	const struct fld *t = port_info;

	/* An active QDR 4X switch port as OpenSM leaves it. */
	memset(v, 0, sizeof v);
	SET(t, v, "gid_prefix", 0xfe80000000000000ULL);
	SET(t, v, "lid", 0);
	SET(t, v, "master_sm_lid", 1);
	SET(t, v, "capability_mask", 0x00000000);
	SET(t, v, "local_port_num", 3);
	SET(t, v, "link_width_enabled", 3);
	SET(t, v, "link_width_supported", 3);
	SET(t, v, "link_width_active", 2);
	SET(t, v, "link_speed_supported", 7);
	SET(t, v, "port_state", 4);
	SET(t, v, "port_physical_state", 5);
	SET(t, v, "link_down_default_state", 2);
	SET(t, v, "link_speed_active", 4);
	SET(t, v, "link_speed_enabled", 7);
	SET(t, v, "neighbor_mtu", 5);
	SET(t, v, "vl_cap", 4);
	SET(t, v, "vl_high_limit", 4);
	SET(t, v, "vl_arbitration_high_cap", 8);
	SET(t, v, "vl_arbitration_low_cap", 8);
	SET(t, v, "mtu_cap", 5);
	SET(t, v, "vl_stall_count", 7);
	SET(t, v, "hoq_life", 16);
	SET(t, v, "operational_vls", 4);
	SET(t, v, "partition_enforcement_inbound", 1);
	SET(t, v, "partition_enforcement_outbound", 1);
	SET(t, v, "local_phy_errors", 8);
	SET(t, v, "overrun_errors", 8);
	emit_case("portinfo", "switch_qdr", t, v, NULL, NULL);

	/* A CA port that is the master SM, with extended speeds (EDR 4X). */
	memset(v, 0, sizeof v);
	SET(t, v, "m_key", 0x0123456789abcdefULL);
	SET(t, v, "gid_prefix", 0xfe80000000000000ULL);
	SET(t, v, "lid", 1);
	SET(t, v, "master_sm_lid", 1);
	SET(t, v, "capability_mask", 0x0251c84aU); /* IsSM, traps, ext speeds, capmask2, ... */
	SET(t, v, "diag_code", 0);
	SET(t, v, "m_key_lease_period", 60);
	SET(t, v, "local_port_num", 1);
	SET(t, v, "link_width_enabled", 255);
	SET(t, v, "link_width_supported", 0x13);
	SET(t, v, "link_width_active", 2);
	SET(t, v, "link_speed_supported", 7);
	SET(t, v, "port_state", 4);
	SET(t, v, "port_physical_state", 5);
	SET(t, v, "link_down_default_state", 2);
	SET(t, v, "m_key_protect_bits", 1);
	SET(t, v, "lmc", 2);
	SET(t, v, "link_speed_active", 1);
	SET(t, v, "link_speed_enabled", 15);
	SET(t, v, "neighbor_mtu", 5);
	SET(t, v, "master_sm_sl", 0);
	SET(t, v, "vl_cap", 4);
	SET(t, v, "vl_arbitration_high_cap", 8);
	SET(t, v, "vl_arbitration_low_cap", 8);
	SET(t, v, "mtu_cap", 5);
	SET(t, v, "hoq_life", 19);
	SET(t, v, "operational_vls", 4);
	SET(t, v, "guid_cap", 128);
	SET(t, v, "subnet_timeout", 18);
	SET(t, v, "resp_time_value", 16);
	SET(t, v, "max_credit_hint", 1024);
	SET(t, v, "link_round_trip_latency", 0x000abc);
	SET(t, v, "capability_mask2", 0x07ff);
	SET(t, v, "link_speed_ext_active", 2);
	SET(t, v, "link_speed_ext_supported", 0xf);
	SET(t, v, "link_speed_ext_enabled", 31);
	emit_case("portinfo", "ca_edr_sm", t, v, NULL, NULL);

	/* A SubnSet body: no-change codes, new LID, client reregister. */
	memset(v, 0, sizeof v);
	SET(t, v, "gid_prefix", 0xfe80000000000000ULL);
	SET(t, v, "lid", 0xbfff);
	SET(t, v, "master_sm_lid", 0x0001);
	SET(t, v, "m_key_lease_period", 0);
	SET(t, v, "link_speed_ext_enabled", 30);
	SET(t, v, "client_reregister", 1);
	SET(t, v, "multicast_pkey_trap_suppression_enabled", 2);
	SET(t, v, "subnet_timeout", 18);
	emit_case("portinfo", "set_nochange", t, v, NULL, NULL);

	all_ones(t, v);
	emit_case("portinfo", "allones", t, v, NULL, NULL);
	pattern(t, v, 7);
	emit_case("portinfo", "pattern", t, v, NULL, NULL);
	pattern(t, v, 1234567);
	emit_case("portinfo", "pattern2", t, v, NULL, NULL);
}

static void gen_switch_info(void)
{
	uint64_t v[MAXF];
	const struct fld *t = switch_info;

	memset(v, 0, sizeof v);
	SET(t, v, "linear_fdb_cap", 49152);
	SET(t, v, "multicast_fdb_cap", 4096);
	SET(t, v, "linear_fdb_top", 77);
	SET(t, v, "default_mcast_primary_port", 255);
	SET(t, v, "default_mcast_not_primary_port", 255);
	SET(t, v, "life_time_value", 18);
	SET(t, v, "port_state_change", 1);
	SET(t, v, "optimized_sl_to_vl_mapping_programming", 1);
	SET(t, v, "partition_enforcement_cap", 32);
	SET(t, v, "inbound_enforcement_cap", 1);
	SET(t, v, "outbound_enforcement_cap", 1);
	SET(t, v, "filter_raw_inbound_cap", 1);
	SET(t, v, "filter_raw_outbound_cap", 1);
	SET(t, v, "enhanced_port0", 1);
	SET(t, v, "multicast_fdb_top", 0xc01f);
	emit_case("switchinfo", "typical", t, v, NULL, NULL);

	all_ones(t, v);
	emit_case("switchinfo", "allones", t, v, NULL, NULL);
	pattern(t, v, 99);
	emit_case("switchinfo", "pattern", t, v, NULL, NULL);
}

static void gen_sm_info(void)
{
	uint64_t v[MAXF];
	const struct fld *t = sm_info;

	memset(v, 0, sizeof v);
	SET(t, v, "guid", 0x0002c90300000001ULL);
	SET(t, v, "sm_key", 0);
	SET(t, v, "act_count", 12345);
	SET(t, v, "priority", 15);
	SET(t, v, "sm_state", 3);
	emit_case("sminfo", "master", t, v, NULL, NULL);

	memset(v, 0, sizeof v);
	SET(t, v, "guid", 0x0002c90300000002ULL);
	SET(t, v, "sm_key", 0x1122334455667788ULL);
	SET(t, v, "act_count", 0xffffffff);
	SET(t, v, "priority", 0);
	SET(t, v, "sm_state", 2);
	emit_case("sminfo", "standby", t, v, NULL, NULL);

	all_ones(t, v);
	emit_case("sminfo", "allones", t, v, NULL, NULL);
	pattern(t, v, 5);
	emit_case("sminfo", "pattern", t, v, NULL, NULL);
}

static void gen_guid_info(void)
{
	uint64_t v[MAXF];
	const struct fld *t = guid_info;

	pattern(t, v, 3);
	emit_case("guidinfo", "pattern", t, v, NULL, NULL);
	all_ones(t, v);
	emit_case("guidinfo", "allones", t, v, NULL, NULL);
}

struct notice_extra {
	int trap;		/* 0: raw details only */
	uint32_t lid;
	uint32_t capmask;
	uint8_t raw[54];
};

static void notice_details(uint8_t *buf, FILE *f, const void *arg)
{
	const struct notice_extra *e = arg;
	mad_set_array(buf, 0, IB_NOTICE_DATA_DETAILS_F, (void *)e->raw);
	if (e->trap == 128) {
		mad_set_field(buf, 0, IB_NOTICE_DATA_LID_F, e->lid);
		fprintf(f, "trap128.switch_lid=0x%x\n", e->lid);
	} else if (e->trap == 144) {
		mad_set_field(buf, 0, IB_NOTICE_DATA_144_LID_F, e->lid);
		mad_set_field(buf, 0, IB_NOTICE_DATA_144_CAPMASK_F, e->capmask);
		fprintf(f, "trap144.lid=0x%x\n", e->lid);
		fprintf(f, "trap144.capability_mask=0x%x\n", e->capmask);
	}
	/* The details as they ended up in the buffer. */
	fprintf(f, "data_details=");
	for (int i = 10; i < 64; i++)
		fprintf(f, "%02x", buf[i]);
	fprintf(f, "\n");
}

static void gen_notice(void)
{
	uint64_t v[MAXF];
	const struct fld *t = notice;
	struct notice_extra e;

	memset(v, 0, sizeof v);
	memset(&e, 0, sizeof e);
	SET(t, v, "is_generic", 1);
	SET(t, v, "notice_type", 1);
	SET(t, v, "producer_type", 2);
	SET(t, v, "trap_number", 128);
	SET(t, v, "issuer_lid", 5);
	SET(t, v, "notice_count", 0);
	SET(t, v, "notice_toggle", 0);
	e.trap = 128;
	e.lid = 5;
	emit_case("notice", "trap128", t, v, notice_details, &e);

	memset(v, 0, sizeof v);
	memset(&e, 0, sizeof e);
	SET(t, v, "is_generic", 1);
	SET(t, v, "notice_type", 4);
	SET(t, v, "producer_type", 1);
	SET(t, v, "trap_number", 144);
	SET(t, v, "issuer_lid", 0x1234);
	SET(t, v, "notice_count", 3);
	SET(t, v, "notice_toggle", 1);
	e.trap = 144;
	e.lid = 0x1234;
	e.capmask = 0x0251c84a;
	emit_case("notice", "trap144", t, v, notice_details, &e);

	/* A vendor notice with every header bit set and patterned details. */
	all_ones(t, v);
	SET(t, v, "is_generic", 0);
	memset(&e, 0, sizeof e);
	for (int i = 0; i < 54; i++)
		e.raw[i] = (uint8_t)(i * 29 + 3);
	emit_case("notice", "vendor", t, v, notice_details, &e);

	all_ones(t, v);
	memset(&e, 0, sizeof e);
	memset(e.raw, 0xff, sizeof e.raw);
	emit_case("notice", "allones", t, v, notice_details, &e);
}

static void gen_node_desc(const char *cas, const char *text)
{
	uint8_t buf[DATA_LEN] = {0}, desc[DATA_LEN] = {0};
	char base[256];
	size_t n = strlen(text);
	memcpy(desc, text, n > DATA_LEN ? DATA_LEN : n);
	mad_set_array(buf, 0, IB_NODE_DESC_F, desc);
	snprintf(base, sizeof base, "nodedesc_%s", cas);
	FILE *f = open_out(base, "fields");
	fprintf(f, "# nodedesc case %s: encoded by libibmad (fixturegen gen)\n", cas);
	fprintf(f, "text=%.*s\n", (int)(n > DATA_LEN ? DATA_LEN : n), text);
	fclose(f);
	write_hex(base, buf, DATA_LEN);
}

/* Table attributes: libibmad has no per-entry fields, so encode by hand. */
static void put16(uint8_t *b, int at, unsigned v)
{
	b[at] = v >> 8;
	b[at + 1] = v & 0xff;
}

static void gen_tables(void)
{
	uint8_t buf[DATA_LEN];
	FILE *f;

	/* LFT block: a mix of ports, 0 (port 0 = the switch) and 255 (drop). */
	memset(buf, 0, sizeof buf);
	for (int i = 0; i < 64; i++)
		buf[i] = (i % 7 == 0) ? 255 : (uint8_t)(i % 37);
	write_hex("lft_mixed", buf, DATA_LEN);
	f = open_out("lft_mixed", "fields");
	fprintf(f, "# lft case mixed: encoded by hand (fixturegen gen)\nports=");
	for (int i = 0; i < 64; i++)
		fprintf(f, "%s%u", i ? "," : "", buf[i]);
	fprintf(f, "\n");
	fclose(f);

	/* P_KeyTable block: default, limited, invalid and odd keys. */
	static const unsigned pk[32] = {0xffff, 0x7fff, 0x8001, 0x0001, 0x0000, 0x8000,
		0x1234, 0xabcd, 0xfffe, 0x7ffe};
	memset(buf, 0, sizeof buf);
	for (int i = 0; i < 32; i++)
		put16(buf, 2 * i, pk[i] ? pk[i] : (i >= 10 ? (unsigned)(0x8000 | (i * 257)) : 0));
	write_hex("pkeys_mixed", buf, DATA_LEN);
	f = open_out("pkeys_mixed", "fields");
	fprintf(f, "# pkeys case mixed: encoded by hand (fixturegen gen)\npkeys=");
	for (int i = 0; i < 32; i++)
		fprintf(f, "%s0x%04x", i ? "," : "", (buf[2 * i] << 8) | buf[2 * i + 1]);
	fprintf(f, "\n");
	fclose(f);

	/* MFT block. */
	memset(buf, 0, sizeof buf);
	for (int i = 0; i < 32; i++)
		put16(buf, 2 * i, (unsigned)((1u << (i % 16)) | (i * 0x0101u)) & 0xffff);
	write_hex("mft_mixed", buf, DATA_LEN);
	f = open_out("mft_mixed", "fields");
	fprintf(f, "# mft case mixed: encoded by hand (fixturegen gen)\nport_masks=");
	for (int i = 0; i < 32; i++)
		fprintf(f, "%s0x%04x", i ? "," : "", (buf[2 * i] << 8) | buf[2 * i + 1]);
	fprintf(f, "\n");
	fclose(f);

	/* SLtoVL: SL i -> VL (i*5+3) mod 16, two SLs per byte, even SL high. */
	memset(buf, 0, sizeof buf);
	unsigned vl[16];
	for (int i = 0; i < 16; i++)
		vl[i] = (i * 5 + 3) % 16;
	for (int i = 0; i < 8; i++)
		buf[i] = (uint8_t)(vl[2 * i] << 4 | vl[2 * i + 1]);
	write_hex("sl2vl_mixed", buf, DATA_LEN);
	f = open_out("sl2vl_mixed", "fields");
	fprintf(f, "# sl2vl case mixed: encoded by hand (fixturegen gen)\nvl=");
	for (int i = 0; i < 16; i++)
		fprintf(f, "%s%u", i ? "," : "", vl[i]);
	fprintf(f, "\n");
	fclose(f);

	/* VLArb block: (VL, weight) pairs, reserved nibble zero. */
	memset(buf, 0, sizeof buf);
	for (int i = 0; i < 32; i++) {
		buf[2 * i] = (uint8_t)(i % 16);
		buf[2 * i + 1] = (uint8_t)(i * 8 + 7);
	}
	write_hex("vlarb_mixed", buf, DATA_LEN);
	f = open_out("vlarb_mixed", "fields");
	fprintf(f, "# vlarb case mixed: encoded by hand (fixturegen gen)\nentries=");
	for (int i = 0; i < 32; i++)
		fprintf(f, "%s%u:%u", i ? "," : "", buf[2 * i], buf[2 * i + 1]);
	fprintf(f, "\n");
	fclose(f);
}

/* ---- capture mode ---- */

static void decode_fields(FILE *f, const struct fld *t, uint8_t *buf)
{
	for (int i = 0; t[i].name; i++) {
		uint64_t v = t[i].bits > 32 ? mad_get_field64(buf, 0, t[i].f)
					    : mad_get_field(buf, 0, t[i].f);
		fprintf(f, "%s=0x%llx\n", t[i].name, (unsigned long long)v);
	}
}

static struct ibmad_port *srcport;

static int query(uint8_t *buf, const char *path, int attr, unsigned mod)
{
	ib_portid_t id;
	memset(&id, 0, sizeof id);
	if (str2drpath(&id.drpath, (char *)path, 0, 0) < 0)
		return -1;
	memset(buf, 0, DATA_LEN);
	return smp_query_via(buf, &id, attr, mod, 0, srcport) ? 0 : -1;
}

static int set(uint8_t *buf, const char *path, int attr, unsigned mod)
{
	ib_portid_t id;
	memset(&id, 0, sizeof id);
	if (str2drpath(&id.drpath, (char *)path, 0, 0) < 0)
		return -1;
	return smp_set_via(buf, &id, attr, mod, 0, srcport) ? 0 : -1;
}

static void path_tag(char *out, size_t n, const char *path, int port)
{
	size_t j = 0;
	for (const char *p = path; *p && j + 1 < n; p++)
		out[j++] = *p == ',' ? '-' : *p;
	out[j] = 0;
	if (port >= 0)
		snprintf(out + j, n - j, "_port%d", port);
}

static void capture_one(const char *attr, int id, const char *path, int port,
			unsigned mod, const struct fld *t)
{
	uint8_t buf[DATA_LEN];
	char tag[128], base[256];
	if (query(buf, path, id, mod) < 0) {
		fprintf(stderr, "query %s %s failed\n", attr, path);
		exit(1);
	}
	path_tag(tag, sizeof tag, path, port);
	snprintf(base, sizeof base, "ibsim_%s_%s", attr, tag);
	write_hex(base, buf, DATA_LEN);
	FILE *f = open_out(base, "fields");
	fprintf(f, "# %s from ibsim at DR path %s, attribute modifier 0x%x; "
		"decoded by libibmad (fixturegen capture)\n", attr, path, mod);
	if (t)
		decode_fields(f, t, buf);
	else if (id == IB_ATTR_NODE_DESC)
		fprintf(f, "text=%.64s\n", (char *)buf);
	else if (id == IB_ATTR_PKEY_TBL) {
		fprintf(f, "pkeys=");
		for (int i = 0; i < 32; i++)
			fprintf(f, "%s0x%04x", i ? "," : "", (buf[2 * i] << 8) | buf[2 * i + 1]);
		fprintf(f, "\n");
	} else if (id == IB_ATTR_LINEARFORWTBL) {
		fprintf(f, "ports=");
		for (int i = 0; i < 64; i++)
			fprintf(f, "%s%u", i ? "," : "", buf[i]);
		fprintf(f, "\n");
	}
	fclose(f);
}

static void capture(void)
{
	int classes[] = {IB_SMI_CLASS, IB_SMI_DIRECT_CLASS};
	srcport = mad_rpc_open_port(NULL, 0, classes, 2);
	if (!srcport) {
		fprintf(stderr, "cannot open a MAD port (is ibsim running and umad2sim preloaded?)\n");
		exit(1);
	}
	/* Hca1 is the local node; 0,1 is Switch1; 0,1,3 is Switch2; 0,1,2 is Hca2. */
	capture_one("nodeinfo", IB_ATTR_NODE_INFO, "0", -1, 0, node_info);
	capture_one("nodeinfo", IB_ATTR_NODE_INFO, "0,1", -1, 0, node_info);
	capture_one("nodeinfo", IB_ATTR_NODE_INFO, "0,1,3", -1, 0, node_info);
	capture_one("nodeinfo", IB_ATTR_NODE_INFO, "0,1,2", -1, 0, node_info);
	capture_one("portinfo", IB_ATTR_PORT_INFO, "0", 1, 1, port_info);
	capture_one("portinfo", IB_ATTR_PORT_INFO, "0,1", 0, 0, port_info);
	capture_one("portinfo", IB_ATTR_PORT_INFO, "0,1", 1, 1, port_info);
	capture_one("portinfo", IB_ATTR_PORT_INFO, "0,1", 3, 3, port_info);
	capture_one("portinfo", IB_ATTR_PORT_INFO, "0,1", 8, 8, port_info);
	capture_one("switchinfo", IB_ATTR_SWITCH_INFO, "0,1", -1, 0, switch_info);
	capture_one("switchinfo", IB_ATTR_SWITCH_INFO, "0,1,3", -1, 0, switch_info);
	capture_one("nodedesc", IB_ATTR_NODE_DESC, "0", -1, 0, NULL);
	capture_one("nodedesc", IB_ATTR_NODE_DESC, "0,1", -1, 0, NULL);
	capture_one("pkeys", IB_ATTR_PKEY_TBL, "0", -1, 0, NULL);
	capture_one("pkeys", IB_ATTR_PKEY_TBL, "0,1", 1, 1u << 16, NULL);
	capture_one("guidinfo", IB_ATTR_GUID_INFO, "0", -1, 0, guid_info);

	/* LFT: ibsim starts with an empty table, so program block 0 of Switch1
	 * the way an SM would, then read it back. */
	uint8_t lft[DATA_LEN];
	memset(lft, 0xff, sizeof lft);
	lft[1] = 1;	/* Hca1 */
	lft[2] = 2;	/* Hca2 */
	lft[3] = 0;	/* Switch1 itself */
	lft[4] = 3;	/* Switch2 */
	if (set(lft, "0,1", IB_ATTR_LINEARFORWTBL, 0) < 0) {
		fprintf(stderr, "LFT set failed\n");
		exit(1);
	}
	/* LinearFDBTop = 4 so ibroute lists the programmed LIDs. */
	uint8_t si[DATA_LEN];
	if (query(si, "0,1", IB_ATTR_SWITCH_INFO, 0) < 0)
		exit(1);
	mad_set_field(si, 0, IB_SW_LINEAR_FDB_TOP_F, 4);
	mad_set_field(si, 0, IB_SW_STATE_CHANGE_F, 0);
	if (set(si, "0,1", IB_ATTR_SWITCH_INFO, 0) < 0) {
		fprintf(stderr, "SwitchInfo set failed\n");
		exit(1);
	}
	capture_one("lft", IB_ATTR_LINEARFORWTBL, "0,1", -1, 0, NULL);
	mad_rpc_close_port(srcport);
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "gen") && strcmp(argv[1], "capture"))) {
		fprintf(stderr, "usage: %s gen|capture <outdir>\n", argv[0]);
		return 2;
	}
	outdir = argv[2];
	if (!strcmp(argv[1], "capture")) {
		capture();
		return 0;
	}
	gen_node_info();
	gen_port_info();
	gen_switch_info();
	gen_sm_info();
	gen_guid_info();
	gen_notice();
	gen_node_desc("ascii", "Switch1 ibsim leaf, rack 3");
	gen_node_desc("full64", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	gen_node_desc("utf8", "n\xc5\x93ud-\xc3\xbc HCA-1");
	gen_tables();
	return 0;
}
