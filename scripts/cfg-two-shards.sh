# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the tests that run two shards of one model in one process.
#
# two_shards_cfg OUT DIR DRAM L2 [L2_MORE_0 [L2_MORE_1]]: role "all", shards
# 0 and 1 of model 0 (ingest lcores 1 and 2), each with DRAM tokens of DRAM
# and a second tier of L2 tokens in DIR (L2_MORE_k: more keys of shard k's
# l2 group, a key file say), and the driver that knows them. The caller
# appends its wafer group (and a shared group); run it with three lcores.
two_shards_cfg() {
	local k more
	{
		echo 'role = "all"; poll_mode = "idle"; mtu = 9000;'
		echo 'lcores = { ingest = [1, 2]; refill = []; control = 0; };'
		echo 'shard = ('
		for k in 0 1; do
			[ "$k" = 0 ] && more=${5:-} || more=${6:-}
			echo "  { id = $k; model = 0; batch_timeout_ms = 1000; status_interval_ms = 20;"
			echo "    address = { mac = \"02:00:00:00:01:0$k\"; ipv4 = \"10.99.0.1$k\"; };"
			echo '    wafer = { mac = "02:00:00:00:00:01"; ipv4 = "10.99.0.1"; };'
			echo "    caches = ( { id = 0; bytes_per_token = 128; buffers = 2; capacity_tokens = $3; } );"
			echo "    l2 = { dir = \"$2\"; column = 64; capacity_tokens = [$4]; $more}; }$([ "$k" = 0 ] && echo ,)"
		done
		echo ');'
		echo 'driver = { address = { mac = "02:00:00:00:00:01"; ipv4 = "10.99.0.1"; };'
		echo '  column = 64; policy = "lru"; retransmit_ms = 5;'
		echo '  models = ( { name = "demo-model"; caches = ( { id = 0; rule = "full"; } );'
		echo '    refill_latency_us = 20; refill_gbps = 10; shards = ('
		for k in 0 1; do
			echo "      { id = $k; address = { mac = \"02:00:00:00:01:0$k\"; ipv4 = \"10.99.0.1$k\"; };"
			echo "        bytes_per_token = [128]; capacity_tokens = [$3]; l2_tokens = [$4]; }$([ "$k" = 0 ] && echo ,)"
		done
		echo '    ); } );'
		echo '};'
	} >"$1"
	mkdir -p "$2"
}
