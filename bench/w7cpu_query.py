"""bench/w7cpu.sh's requests: W7's one-day waterfall (INSTRUMENTS x 40 fields, every series
matched), the ten-day one (INSTRUMENTS/10), TS.MGET and TS.QUERYINDEX with the one-day
FILTER, each ROUNDS times on a raw socket (read to a PING's reply: no client parsing), and
prints the server's CPU ms per call (utime + stime of every thread, /proc/PID/stat, 10 ms
ticks: on a shared machine CPU time, not wall time, is the figure) with the reply's md5, so
two binaries' answers can be compared; and the median wall time to the reply's last byte
(after two calls that warm the server up). ONLY=wf1,mget picks requests. Usage:
w7cpu_query.py PORT PID"""
import os, socket, sys, hashlib, time
port=int(sys.argv[1]); pid=sys.argv[2]; I=int(os.environ.get("INSTRUMENTS",1000)); D=int(os.environ.get("DAYS",32)); R=int(os.environ.get("ROUNDS",5))
S=["exchange","vendorA","vendorB","internal","manual"]; DAY=86_400_000; T0=1_700_006_400_000
def resp(*a):
    b=[b"*%d\r\n"%len(a)]
    for x in a:
        x=x if isinstance(x,bytes) else str(x).encode()
        b.append(b"$%d\r\n%s\r\n"%(len(x),x))
    return b"".join(b)
def cpu():
    f=open("/proc/%s/stat"%pid).read().rsplit(")",1)[1].split(); return (int(f[11])+int(f[12]))*1000/os.sysconf("SC_CLK_TCK")
def call(cmd):
    s=socket.create_connection(("127.0.0.1",port)); s.sendall(resp(*cmd)+resp("PING")); buf=bytearray()
    while not buf.endswith(b"+PONG\r\n"):
        c=s.recv(1<<22)
        if not c: raise SystemExit("closed")
        buf+=c
    s.close(); return bytes(buf)
flt=lambda n:["instrument=(%s)"%",".join("I%d"%i for i in range(n)),"field=(%s)"%",".join("F%d"%f for f in range(40))]
d=D//2
reqs={"wf1":["TS.WATERFALL",T0+d*DAY,T0+d*DAY,"SOURCES",*S,"FILTER",*flt(I)],
      "wf10":["TS.WATERFALL",T0+d*DAY,T0+(d+9)*DAY,"SOURCES",*S,"FILTER",*flt(max(1,I//10))],
      "mget":["TS.MGET","FILTER",*flt(I)],
      "qi":["TS.QUERYINDEX",*flt(I)]}
only=os.environ.get("ONLY")
for name,cmd in reqs.items():
    if only and name not in only.split(","): continue
    ts=[]; ws=[]
    for _ in range(2): call(cmd)
    for _ in range(R):
        c=cpu(); w=time.perf_counter(); b=call(cmd); ws.append((time.perf_counter()-w)*1000); ts.append(cpu()-c)
    ts.sort(); ws.sort()
    print("%s: cpu ms min %.0f median %.0f; wall ms median %.1f; reply %d bytes md5 %s"%(name,ts[0],ts[len(ts)//2],ws[len(ws)//2],len(b),hashlib.md5(b).hexdigest()[:12]),flush=True)
