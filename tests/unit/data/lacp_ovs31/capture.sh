#!/bin/bash
# Captures Open vSwitch 3.1's lacp/show for the states lacp_test.cpp models:
# one private ovsdb-server + ovs-vswitchd (--enable-dummy=override) under
# WORKDIR (which must not exist), its clock stopped and driven by
# time/warp in 100 ms steps, bonds linked by netdev-dummy unix sockets:
#   bond0 <-> bond1   active, lacp-time=fast (p1-p3, p2-p4)
#   bond4 <-> bond5   active slow <-> passive (p9-p11, p10-p12)
#   bond2             passive, alone
#   bond3             active, lacp-fallback-ab=true, alone
#   bond6             active fast, alone (bond6_expired.txt: 300 ms in)
#   bond7             p15 to bond8 (p17), p16 to bond9 (p19): another system
#   bond10            p21 to bond11 (p23), p22 to bond12 (p25): the same
#                     system id (bond12's lacp-system-id), another key
# bondN.txt: lacp/show bondN 5.3 s in; stats0.txt: lacp/show-stats bond0;
# cut4s_*/cut7s_*: 4 s / 7 s after p4's socket is pointed elsewhere (the
# p2-p4 link cut); pdus.hex: p13's and p1's first PDUs from tx_pcap
# (written by hand from the pcaps with scapy). Copy WORKDIR/*.txt here.
# lacp-aggregation-key is set everywhere: see lacp_test.cpp's header.
set -e
D=${1:?usage: capture.sh WORKDIR}
[ ! -e "$D" ] || { echo "capture.sh: $D exists" >&2; exit 1; }
mkdir -p $D
export OVS_RUNDIR=$D OVS_DBDIR=$D OVS_LOGDIR=$D
ovsdb-tool create $D/conf.db /usr/share/openvswitch/vswitch.ovsschema
ovsdb-server $D/conf.db --remote=punix:$D/db.sock --pidfile=$D/ovsdb.pid --detach --log-file=$D/ovsdb.log
ovs-vswitchd unix:$D/db.sock --enable-dummy=override --disable-system --pidfile=$D/vsw.pid --detach --log-file=$D/vsw.log
V="ovs-vsctl --db=unix:$D/db.sock"
A="ovs-appctl -t $D/ovs-vswitchd.$(cat $D/vsw.pid).ctl"
echo "$A" > $D/appctl
$A time/stop
# bond0 <-> bond1 (fast), bond4 <-> bond5 (slow), bond2 passive alone, bond3 fallback alone
$V add-br br0 -- set bridge br0 datapath_type=netdev other-config:hwaddr=aa:55:aa:55:00:00 \
  -- add-bond br0 bond0 p1 p2 bond_mode=balance-tcp lacp=active other-config:lacp-time=fast other-config:bond-rebalance-interval=0 \
  -- set interface p1 type=dummy options:pstream=punix:$D/p1.sock ofport_request=1 other-config:lacp-aggregation-key=2 \
  -- set interface p2 type=dummy options:pstream=punix:$D/p2.sock ofport_request=2 other-config:lacp-aggregation-key=2 \
  -- add-br br1 -- set bridge br1 datapath_type=netdev other-config:hwaddr=aa:66:aa:66:00:00 \
  -- add-bond br1 bond1 p3 p4 bond_mode=balance-tcp lacp=active other-config:lacp-time=fast other-config:bond-rebalance-interval=0 \
  -- set interface p3 type=dummy options:stream=unix:$D/p1.sock ofport_request=3 other-config:lacp-aggregation-key=4 \
  -- set interface p4 type=dummy options:stream=unix:$D/p2.sock ofport_request=4 other-config:lacp-aggregation-key=4 \
  -- add-br br2 -- set bridge br2 datapath_type=netdev other-config:hwaddr=aa:77:aa:77:00:00 \
  -- add-bond br2 bond2 p5 p6 bond_mode=balance-tcp lacp=passive \
  -- set interface p5 type=dummy ofport_request=5 other-config:lacp-aggregation-key=5 \
  -- set interface p6 type=dummy ofport_request=6 other-config:lacp-aggregation-key=5 \
  -- add-br br3 -- set bridge br3 datapath_type=netdev other-config:hwaddr=aa:88:aa:88:00:00 \
  -- add-bond br3 bond3 p7 p8 bond_mode=balance-tcp lacp=active other-config:lacp-fallback-ab=true \
  -- set interface p7 type=dummy ofport_request=7 other-config:lacp-aggregation-key=7 \
  -- set interface p8 type=dummy ofport_request=8 other-config:lacp-aggregation-key=7 \
  -- add-br br4 -- set bridge br4 datapath_type=netdev other-config:hwaddr=aa:99:aa:99:00:00 \
  -- add-bond br4 bond4 p9 p10 bond_mode=balance-tcp lacp=active other-config:bond-rebalance-interval=0 \
  -- set interface p9 type=dummy options:pstream=punix:$D/p9.sock ofport_request=9 other-config:lacp-aggregation-key=9 \
  -- set interface p10 type=dummy options:pstream=punix:$D/p10.sock ofport_request=10 other-config:lacp-aggregation-key=9 \
  -- add-br br5 -- set bridge br5 datapath_type=netdev other-config:hwaddr=aa:aa:aa:aa:00:00 \
  -- add-bond br5 bond5 p11 p12 bond_mode=balance-tcp lacp=passive other-config:bond-rebalance-interval=0 \
  -- set interface p11 type=dummy options:stream=unix:$D/p9.sock ofport_request=11 other-config:lacp-aggregation-key=11 \
  -- set interface p12 type=dummy options:stream=unix:$D/p10.sock ofport_request=12 other-config:lacp-aggregation-key=11 \
  -- add-br br6 -- set bridge br6 datapath_type=netdev other-config:hwaddr=aa:bb:aa:bb:00:00 \
  -- add-bond br6 bond6 p13 p14 bond_mode=balance-tcp lacp=active other-config:lacp-time=fast \
  -- set interface p13 type=dummy ofport_request=13 other-config:lacp-aggregation-key=13 options:tx_pcap=$D/p13.pcap \
  -- set interface p14 type=dummy ofport_request=14 other-config:lacp-aggregation-key=13 \
  -- set interface p1 options:tx_pcap=$D/p1.pcap \
  -- add-br br7 -- set bridge br7 datapath_type=netdev other-config:hwaddr=aa:30:00:00:00:07 \
  -- add-bond br7 bond7 p15 p16 bond_mode=balance-tcp lacp=active other-config:lacp-time=fast \
  -- set interface p15 type=dummy options:pstream=punix:$D/p15.sock ofport_request=15 other-config:lacp-aggregation-key=15 \
  -- set interface p16 type=dummy options:pstream=punix:$D/p16.sock ofport_request=16 other-config:lacp-aggregation-key=15 \
  -- add-br br8 -- set bridge br8 datapath_type=netdev other-config:hwaddr=aa:40:00:00:00:08 \
  -- add-bond br8 bond8 p17 p18 bond_mode=balance-tcp lacp=active other-config:lacp-time=fast \
  -- set interface p17 type=dummy options:stream=unix:$D/p15.sock ofport_request=17 other-config:lacp-aggregation-key=17 \
  -- set interface p18 type=dummy ofport_request=18 other-config:lacp-aggregation-key=17 \
  -- add-br br9 -- set bridge br9 datapath_type=netdev other-config:hwaddr=aa:40:00:00:00:09 \
  -- add-bond br9 bond9 p19 p20 bond_mode=balance-tcp lacp=active other-config:lacp-time=fast \
  -- set interface p19 type=dummy options:stream=unix:$D/p16.sock ofport_request=19 other-config:lacp-aggregation-key=19 \
  -- set interface p20 type=dummy ofport_request=20 other-config:lacp-aggregation-key=19 \
  -- add-br br10 -- set bridge br10 datapath_type=netdev other-config:hwaddr=aa:30:00:00:00:10 \
  -- add-bond br10 bond10 p21 p22 bond_mode=balance-tcp lacp=active other-config:lacp-time=fast \
  -- set interface p21 type=dummy options:pstream=punix:$D/p21.sock ofport_request=21 other-config:lacp-aggregation-key=21 \
  -- set interface p22 type=dummy options:pstream=punix:$D/p22.sock ofport_request=22 other-config:lacp-aggregation-key=21 \
  -- add-br br11 -- set bridge br11 datapath_type=netdev other-config:hwaddr=aa:40:00:00:00:11 \
  -- add-bond br11 bond11 p23 p24 bond_mode=balance-tcp lacp=active other-config:lacp-time=fast \
  -- set interface p23 type=dummy options:stream=unix:$D/p21.sock ofport_request=23 other-config:lacp-aggregation-key=23 \
  -- set interface p24 type=dummy ofport_request=24 other-config:lacp-aggregation-key=23 \
  -- add-br br12 -- set bridge br12 datapath_type=netdev other-config:hwaddr=aa:40:00:00:00:12 \
  -- add-bond br12 bond12 p25 p26 bond_mode=balance-tcp lacp=active other-config:lacp-time=fast \
     other-config:lacp-system-id=aa:40:00:00:00:11 \
  -- set interface p25 type=dummy options:stream=unix:$D/p22.sock ofport_request=25 other-config:lacp-aggregation-key=25 \
  -- set interface p26 type=dummy ofport_request=26 other-config:lacp-aggregation-key=25
$A netdev-dummy/set-admin-state up
$A time/warp 300 100
$A lacp/show bond6 > $D/bond6_expired.txt
for i in $(seq 1 50); do $A time/warp 100 >/dev/null; done
for b in 0 1 2 3 4 5 6 7 10; do $A lacp/show bond$b > $D/bond$b.txt; $A bond/show bond$b > $D/bondshow$b.txt; done
$A lacp/show-stats bond0 > $D/stats0.txt
# Take p4 down: p2 (its peer) hears nothing more.
$V set interface p4 options:stream=unix:$D/nowhere.sock
for i in $(seq 1 40); do $A time/warp 100 >/dev/null; done
$A lacp/show bond0 > $D/cut4s_bond0.txt; $A lacp/show bond1 > $D/cut4s_bond1.txt
for i in $(seq 1 30); do $A time/warp 100 >/dev/null; done
$A lacp/show bond0 > $D/cut7s_bond0.txt; $A lacp/show bond1 > $D/cut7s_bond1.txt
$A lacp/show-stats > $D/cut7s_stats.txt
ovs-appctl -t $D/ovs-vswitchd.$(cat $D/vsw.pid).ctl exit || true
ovs-appctl -t $D/ovsdb-server.$(cat $D/ovsdb.pid).ctl exit || true
