import torch, sys
sys.path.insert(0,'.')
from wan_fp4 import reference as R
def rel(a,b): return ((a.double()-b.double()).norm()/b.double().norm()).item()
torch.set_num_threads(2)  # run with fp8_headroom.diff applied
for seed in range(3):
    g=torch.Generator().manual_seed(seed)
    q=torch.randn(1,512,2,128,generator=g); k=torch.randn(1,4096,2,128,generator=g); v=torch.randn(1,4096,2,128,generator=g)
    ex=R.attention(q,k,v,"bf16")
    row=[round(rel(R.attention_headroom(q,k,v,"fp8",H)[0],ex),5) for H in (None,0.0,0.5,3.0)]
    print(seed,row)
