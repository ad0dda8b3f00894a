import time, sys
def read():
    with open('/proc/stat') as f:
        p=f.readline().split()[1:]
    v=list(map(int,p)); idle=v[3]+v[4]; return sum(v), idle
out=open(sys.argv[1],'w')
prev=read(); t0=time.time()
while True:
    time.sleep(0.2)
    cur=read(); t=time.time()
    tot=cur[0]-prev[0]; idl=cur[1]-prev[1]
    out.write(f"{t:.3f} {1-idl/tot if tot else 0:.3f}\n"); out.flush()
    prev=cur
