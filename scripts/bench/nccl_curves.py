#!/usr/bin/env python3
# The collective model against the published nccl-tests curves in tests/data/nccl-tests-curves/:
# per curve, the largest and the median |busbw error| per size band for each clustersim binary
# given (run an old and a new build side by side to see what a change does). Error = measured
# time / simulated time - 1, i.e. how much faster the simulation is. Rows that took longer than
# the row of twice their size are measurement glitches and skipped, as in
# tests/workloads/nccl_curves_test.cc, which asserts the bounds.
import json, os, subprocess, sys, tempfile
root=os.path.join(os.path.dirname(os.path.abspath(__file__)),'..','..','tests','data','nccl-tests-curves')+'/'
cases=[('h100-1node-allreduce-nvls-dgxc.tsv','all-reduce','auto',8),
       ('h100-1node-allreduce-nvls-g8-vpbench.tsv','all-reduce','auto',2<<20),
       ('h100-1node-allreduce-ring-together.tsv','all-reduce','ring',2<<20),
       ('h100-1node-allgather-ring-together.tsv','all-gather','auto',8<<20),
       ('h100-1node-reducescatter-ring-together.tsv','reduce-scatter','auto',8<<20),
       ('h100-1node-allreduce-mpi-xxrjun.tsv','all-reduce','auto',0),
       ('h100-1node-allgather-mpi-xxrjun.tsv','all-gather','auto',0),
       ('h100-1node-reducescatter-mpi-xxrjun.tsv','reduce-scatter','auto',0),
       # Several DGX H100 nodes, one 400 Gb/s NIC per GPU, 8 rails, non-blocking leaf/spine.
       ('h100-2node-allreduce-default-nebius-dstack.tsv','all-reduce','auto',8,2),
       ('h100-2node-allreduce-default-nebius-dstack.tsv','all-reduce','nvls-tree',8,2),
       ('h100-10node-allreduce-mpi-xxrjun.tsv','all-reduce','auto',0,10),
       ('h100-10node-allreduce-mpi-xxrjun.tsv','all-reduce','nvls-tree',0,10)]
def load(f):
    rows=[]
    for l in open(root+f):
        if l[0].isdigit():
            s,t,a,b=l.split('\t'); rows.append((int(s),float(t)))
    kept=[r for i,r in enumerate(rows) if not (i+1<len(rows) and rows[i+1][0]==2*r[0] and r[1]>rows[i+1][1])]
    return kept
bands=[(0,65536,'<64K'),(65536,1<<20,'64K-1M'),(1<<20,64<<20,'1M-64M'),(64<<20,1<<40,'>=64M')]
if len(sys.argv) < 2:
    sys.exit('usage: nccl_curves.py CLUSTERSIM [CLUSTERSIM...]  (e.g. an old and a new build)')
tmp=tempfile.mkdtemp()
for binary in sys.argv[1:]:
    print('==',binary)
    for f,op,alg,frm,*rest in cases:
        nodes=rest[0] if rest else 1
        rows=[r for r in load(f) if r[0]>=frm]
        sizes=', '.join(str(s)+'B' for s,_ in rows)
        net='' if nodes==1 else (', scale_out: {kind: fat-tree, nic_bandwidth: 400Gbps, rails: 8, tiers: '
                                 f'[{{name: leaf, nodes: {nodes}}}, {{name: spine, leafs: 1, oversubscription: 1}}]}}')
        y=f"""name: c
seed: 1
cluster: {{gpu: h100-sxm, nodes: {nodes}, gpus_per_node: 8, scale_up: {{kind: nvswitch}}{net}}}
workload:
  kind: collectives
  iterations: 1
  warmup: 0
  tests:
    - {{op: {op}, algorithm: {alg}, group: all, sizes: [{sizes}]}}
"""
        open(tmp+'/c.yaml','w').write(y)
        subprocess.run([binary,'run',tmp+'/c.yaml','--quiet','--json',tmp+'/c.json'],check=True,capture_output=True)
        res=json.load(open(tmp+'/c.json'))['collectives']
        out=[]
        for (s,t),r in zip(rows,res):
            out.append((s,t*1e-6/r['time_s']-1))
        txt=[]
        for lo,hi,name in bands:
            e=[abs(x) for s,x in out if lo<=s<hi]
            if e: txt.append(f"{name}: max {100*max(e):.0f}% median {100*sorted(e)[len(e)//2]:.0f}% (n={len(e)})")
        print(f"{f} [{alg}, from {frm}B]: "+'; '.join(txt))
