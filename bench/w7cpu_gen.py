"""W7's data for bench/w7cpu.sh, written as RESP for `redis-cli --pipe`: INSTRUMENTS x 40 fields
x 5 sources of daily random-walk values over DAYS days, each source covering a different
50-95% of the days (bench/w7.py's shape, without PostgreSQL's copy). Usage: w7cpu_gen.py OUT"""
import os, random, sys
I=int(os.environ.get("INSTRUMENTS",1000)); F=40; D=int(os.environ.get("DAYS",32))
S=["exchange","vendorA","vendorB","internal","manual"]; DAY=86_400_000; T0=1_700_006_400_000
rnd=random.Random(7)
out=open(sys.argv[1],"wb")
def resp(*a):
    b=[b"*%d\r\n"%len(a)]
    for x in a:
        x=x if isinstance(x,bytes) else str(x).encode()
        b.append(b"$%d\r\n%s\r\n"%(len(x),x))
    return b"".join(b)
madd=[]
for i in range(I):
    for f in range(F):
        p=100.0; walk=[]
        for d in range(D):
            p=max(1.0,p*(1+rnd.uniform(-0.02,0.02))); walk.append(round(p,4))
        for k,s in enumerate(S):
            key="I%d:F%d:%s"%(i,f,s)
            out.write(resp("TS.CREATE",key,"LABELS","instrument","I%d"%i,"field","F%d"%f,"source",s))
            c=rnd.uniform(0.5,0.95)
            for d in range(D):
                if rnd.random()<c:
                    madd+=[key,T0+d*DAY,repr(round(walk[d]*(1+0.001*k),4))]
            if len(madd)>=3000:
                out.write(resp("TS.MADD",*madd)); madd=[]
if madd: out.write(resp("TS.MADD",*madd))
