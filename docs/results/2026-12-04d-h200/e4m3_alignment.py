import torch, sys, math
sys.path.insert(0,'.')
from wan_fp4 import reference as R, formats
def rel(a,b): return ((a.double()-b.double()).norm()/b.double().norm()).item()
torch.set_num_threads(2)
# one softmax row set, exact scores: error of E4M3-rounded P with the max at 2^(8-shift)
g=torch.Generator().manual_seed(0)
z=torch.randn(512,4096,generator=g)*1.44
v=torch.randn(4096,128,generator=g)
p=torch.exp2(z-z.amax(-1,keepdim=True))
ex=(p@v)/p.sum(-1,keepdim=True)
for shift in (0.0,0.25,0.5,0.75,1.0,2.0,3.0):
    ps=p*2**(8-shift)
    o=(formats.e4m3_round(ps)@v)/ps.sum(-1,keepdim=True)
    print(shift, round(rel(o,ex),5))
