"""Warp stall samples of an sm90 kernel by region, from `ncu --import REP --page source --csv
--print-source sass > FILE`: `python3 ncu_stalls.py FILE...`. Regions by address: up to the first
GMMA (the set-up and the producer warp's load loop, which comes first in the code), to the last
GMMA (the consumers' main loop), and after it (the epilogue)."""
import csv, collections, sys
for f in sys.argv[1:]:
    rows=list(csv.reader(open(f)))
    hdr=rows[1]; data=rows[2:]
    i_src=hdr.index("Source"); i_ex=hdr.index("Instructions Executed")
    stall_cols=[(j,h[6:]) for j,h in enumerate(hdr) if h.startswith('stall_') and 'Not Issued' not in h]
    q=[k for k,r in enumerate(data) if 'GMMA' in r[i_src]]
    tot=collections.Counter()
    for r in data:
        for j,h in stall_cols: tot[h]+=float(r[j] or 0)
    T=sum(tot.values())
    print(f, 'samples', int(T), {k: f"{100*v/T:.1f}%" for k,v in tot.most_common(8)})
    for name,(a,b) in {'prologue':(0,q[0]),'loop':(q[0],q[-1]+1),'epilogue':(q[-1]+1,len(data))}.items():
        c=collections.Counter()
        for r in data[a:b]:
            for j,h in stall_cols: c[h]+=float(r[j] or 0)
        s=sum(c.values())
        print(f"  {name:9s} {100*s/T:5.1f}% of samples; no_inst {100*c['no_inst']/max(s,1):.1f}% of its own;", {k:int(v) for k,v in c.most_common(5)})
