"""Geneve TLV maps and tun_metadata0..7 on the console: add-tlv-map,
tlv-map-show (ovs-ofctl dump-tlv-map's text), del-tlv-map, errors that
change nothing, rules matching and setting tun_metadataN as dump-flows
prints them, and the running-config round trip. When Open vSwitch 3.1 is
installed the same map and rules go through a private ovs-vswitchd and its
dump-tlv-map / dump-flows texts must equal keel's (keel says max fields=8
where Open vSwitch has 64)."""
import os
import shutil
import subprocess
import tempfile

import ovs_reference
from harness import PATIENCE, check, main, run_keel, tmpdir

MAP = "{class=0xffff,type=0x80,len=4}->tun_metadata0,{class=0xffff,type=0x1,len=8}->tun_metadata3"
FLOWS = [
    "priority=1,tun_metadata0=0xa,actions=drop",
    "priority=2,tun_metadata0=0xa/0xf,actions=drop",
    # (tun_metadata0=0x1/0xffffffff prints as tun_metadata0=0x1 only where
    # add-flow hands the parser the bridge's map: tun_metadata_test.cpp.)
    "priority=4,tun_metadata0=0/0,actions=drop",
    "priority=7,tun_metadata3=0x1234567890abcdef,actions=drop",
    "priority=8,tun_metadata3=0x00000001,actions=drop",
    "priority=10,tun_metadata0,actions=drop",
    "priority=11,tun_flags=+oam,actions=drop",
    "priority=15,tun_metadata0=0xff00/0xff00,actions=drop",
    "priority=16,tun_metadata0=0x0a0b0c0d/0xffff0000,actions=drop",
    "priority=20,actions=set_field:0xb->tun_metadata0",
    "priority=21,actions=move:NXM_NX_TUN_METADATA0[0..31]->NXM_NX_REG0[]",
    "priority=22,actions=load:0x1->NXM_NX_TUN_METADATA3[0..7]",
    "priority=23,actions=set_field:0x1234567890->tun_metadata3",
    "priority=24,actions=set_field:0xa/0xf->tun_metadata0",
    "priority=25,actions=move:NXM_NX_REG0[]->NXM_NX_TUN_METADATA0[0..31]",
    "priority=26,actions=load:0xabcdef->tun_metadata3[8..31]",
    "priority=27,tun_metadata3=0x5,tun_metadata0=0xa,tun_id=0x7b,ip,actions=drop",
    # The other tunnel fields, matched and set (printed as OpenFlow 1.0 loads).
    "priority=30,tun_id=0x7b/0xff,tun_src=1.1.1.0/24,tun_dst=2.2.2.2,actions=set_field:0x7b->tun_id,"
    "set_field:1.1.1.1->tun_dst,set_field:2001:db8::2->tun_ipv6_dst,set_tunnel:0x5,set_tunnel64:0x1122334455",
    "priority=31,tun_ipv6_src=2001:db8::1,tun_ipv6_dst=2001:db8::/32,actions=drop",
    "priority=33,tun_id=5,tun_flags=-oam,actions=drop",
]


def keel(script):
    d = tmpdir()
    empty = os.path.join(d, "empty.cfg")
    open(empty, "w").close()
    return run_keel("--port", "p0=null", "--config", empty, stdin=script, timeout=PATIENCE)


def keel_dump():
    script = "add-br br0\nadd-tlv-map br0 %s\n" % MAP
    script += "".join("add-flow br0 %s\n" % f for f in FLOWS)
    script += "tlv-map-show br0\ndump-flows br0 --no-stats\n"
    p = keel(script)
    check(p.returncode == 0 and "error" not in p.stdout + p.stderr, "keel ran the script", p)
    lines = p.stdout.splitlines(True)
    start = next(i for i, l in enumerate(lines) if l.startswith("NXT_TLV_TABLE_REPLY"))
    end = next(i for i, l in enumerate(lines) if i > start and (l.startswith(" priority") or l.startswith("NXST")))
    flows = sorted(l.rstrip("\n") for l in lines if l.startswith(" priority="))
    return "".join(lines[start:end]), flows, p


def ovs_dump():
    d = tempfile.mkdtemp(prefix="keel-ovs-tlv-")
    env = dict(os.environ, OVS_RUNDIR=d, OVS_DBDIR=d, OVS_LOGDIR=d)
    db = "unix:%s/db.sock" % d

    def sh(*args):
        return subprocess.run(list(args), env=env, check=True, capture_output=True, text=True, timeout=60).stdout

    sh("ovsdb-tool", "create", d + "/conf.db", ovs_reference.SCHEMA)
    sh(ovs_reference.OVSDB, d + "/conf.db", "--remote=punix:%s/db.sock" % d, "--pidfile=%s/ovsdb.pid" % d,
       "--detach", "--log-file=%s/ovsdb.log" % d)
    try:
        sh(ovs_reference.VSWITCHD, db, "--enable-dummy=override", "--disable-system", "--pidfile=%s/vsw.pid" % d,
           "--detach", "--log-file=%s/vsw.log" % d)
        try:
            sh("ovs-vsctl", "--db=" + db, "add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev")
            sh("ovs-ofctl", "add-tlv-map", "br0", MAP)
            sh("ovs-ofctl", "del-flows", "br0")
            for f in FLOWS:
                sh("ovs-ofctl", "add-flow", "br0", f)
            tlv = sh("ovs-ofctl", "dump-tlv-map", "br0")
            flows = sorted(l for l in sh("ovs-ofctl", "dump-flows", "br0", "--no-stats").splitlines()
                           if l.startswith(" priority="))
            return tlv, flows
        finally:
            subprocess.run(["ovs-appctl", "-t", d + "/ovs-vswitchd.%s.ctl" % open(d + "/vsw.pid").read().strip(),
                            "exit"], env=env, capture_output=True, timeout=60)
    finally:
        subprocess.run(["ovs-appctl", "-t", d + "/ovsdb-server.%s.ctl" % open(d + "/ovsdb.pid").read().strip(),
                        "exit"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(d, ignore_errors=True)


def test_tlv_map_show_and_flows():
    tlv, flows, p = keel_dump()
    check(tlv == ("NXT_TLV_TABLE_REPLY (xid=0x2):\n"
                  " max option space=256 max fields=8\n"
                  " allocated option space=12\n"
                  "\n"
                  " mapping table:\n"
                  "  class  type  length  match field\n"
                  " ------  ----  ------  --------------\n"
                  " 0xffff  0x80       4  tun_metadata0\n"
                  " 0xffff   0x1       8  tun_metadata3\n"), "tlv-map-show:\n" + tlv, p)
    check(" priority=22 actions=set_field:0x1/0xff->tun_metadata3" in flows, "load prints as set_field", p)
    check(" priority=2,tun_metadata0=0xa/0xf actions=drop" in flows, "masked match", p)


def test_same_as_open_vswitch():
    if not ovs_reference.available():
        print("SKIP: Open vSwitch 3.1 is not installed")
        return
    tlv, flows, p = keel_dump()
    otlv, oflows = ovs_dump()
    check(tlv == otlv.replace("max fields=64", "max fields=8"), "dump-tlv-map:\nkeel:\n%s\novs:\n%s" % (tlv, otlv))
    check(flows == oflows, "dump-flows:\nkeel:\n%s\novs:\n%s" % ("\n".join(flows), "\n".join(oflows)))


def test_errors_change_nothing():
    p = keel("add-br br0\nadd-tlv-map br0 %s\n"
             "add-tlv-map br0 {class=0xffff,type=0x80,len=4}->tun_metadata1\n"
             "add-tlv-map br0 {class=0xffff,type=0x81,len=4}->tun_metadata0\n"
             "add-tlv-map br0 {class=0xffff,type=0x82,len=5}->tun_metadata2\n"
             "add-tlv-map br0 {class=0xffff,type=0x82,len=4}->tun_metadata8\n"
             "add-tlv-map br0 {class=0xffff,type=0x82}->tun_metadata2\n"
             "add-tlv-map br0 {class=0xffff,type=0x90,len=4}->tun_metadata5,{class=0xffff,type=0x80,len=4}->tun_metadata6\n"
             "add-tlv-map nobr {class=0xffff,type=0x82,len=4}->tun_metadata2\n"
             "add-flow br0 tun_metadata0=0x1/0x1/0x1,actions=drop\n"
             "add-flow br0 tun_metadata9=1,actions=drop\n"
             "tlv-map-show br0\n" % MAP)
    for want in ("NXTTMFC_DUP_ENTRY", "NXTTMFC_ALREADY_MAPPED", "NXTTMFC_BAD_OPT_LEN", "NXTTMFC_BAD_FIELD_IDX",
                 "invalid tlv mapping", "no bridge 'nobr'", "tun_metadata0..tun_metadata7"):
        check(want in p.stdout + p.stderr, "error '%s'" % want, p)
    check("allocated option space=12\n" in p.stdout and "tun_metadata5" not in p.stdout.split("mapping table")[-1],
          "the table is unchanged (the list with a duplicate added nothing)", p)


def test_running_config_round_trip():
    d = tmpdir()
    cfg = os.path.join(d, "keel.cfg")
    p = keel("add-br br0\nadd-tlv-map br0 %s\nadd-flow br0 priority=5,tun_metadata0=0xa/0xf,"
             "actions=set_field:0xb->tun_metadata0\nshow running-config\n" % MAP)
    lines = [l for l in p.stdout.splitlines() if l and not l.startswith("!")]
    check("add-tlv-map br0 " + MAP in lines, "running-config has the map", p)
    with open(cfg, "w") as f:
        f.write("\n".join(lines) + "\n")
    q = run_keel("--port", "p0=null", "--config", cfg, stdin="show running-config\n", timeout=PATIENCE)
    again = [l for l in q.stdout.splitlines() if l and not l.startswith("!")]
    check(again == lines, "replayed config prints the same:\n%s\n---\n%s" % ("\n".join(lines), "\n".join(again)), q)
    p = keel("add-br br0\nadd-tlv-map br0 %s\ndel-tlv-map br0\nshow running-config\n" % MAP)
    check("add-tlv-map" not in p.stdout, "del-tlv-map BR removes every mapping", p)


if __name__ == "__main__":
    main([test_tlv_map_show_and_flows, test_same_as_open_vswitch, test_errors_change_nothing,
          test_running_config_round_trip])
