import torch, sys, math
sys.path.insert(0,'.')
torch.set_num_threads(2)
from wan_fp4 import reference as R
from wan_fp4.modes import QK_SCALE_BLOCK, TILE_N
def run(gain, S=8192, rows=512, H=3.0):
    g=torch.Generator().manual_seed(0)
    q=torch.randn(1,rows,1,128,generator=g)*gain; k=torch.randn(1,S,1,128,generator=g)*gain; v=torch.randn(1,S,1,128,generator=g)
    ops=R.quantize_fp8(q,k,v)
    c=R.log2_scale(1/math.sqrt(128))
    q8=ops.q8[0,:,0].float(); k8=ops.k8[0,:,0].float()
    qs=ops.q_scale[0,:,0].repeat_interleave(128)[:rows]*c
    ks=ops.k_scale[0,:,0]
    m=torch.full((rows,),-math.inf)
    trig=0; moved_w=0; tiles=0
    # thread key sets: quad qd holds keys 8j+2qd+cc
    keyq=torch.tensor([[8*j+2*qd+cc for j in range(16) for cc in range(2)] for qd in range(4)])
    for t in range(S//TILE_N):
        s=q8@k8[t*128:(t+1)*128].T
        qk=(qs*ks[t])
        p,m_new,mv=R.fp8_headroom_p(s,qk,m,H) if hasattr(R,'fp8_headroom_p') else None
        if t>0:
            # p with held reference (before the move) for the trigger test
            bias=(8.0-m.double()).float()
            ph=torch.exp2((s.double()*qk[:,None].double()+bias[:,None].double()).float())
            sums=ph[:,keyq].sum(-1)  # rows x 4
            over=(sums>448).view(rows//16,16,4).any(-1).any(-1)  # per warp of 16 rows
            trig+=over.sum().item(); moved_w+=(mv.view(rows//16,16).any(-1)).sum().item(); tiles+=rows//16
        m=m_new
    print(f"gain {gain}: warp-tiles whose vote fires {trig/tiles:.3f}, with a real move {moved_w/tiles:.4f}")
run(1.0); run(6**0.5)
