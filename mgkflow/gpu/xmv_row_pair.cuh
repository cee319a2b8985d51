// XMV fragment of the per-block solver, strategy "rows" (mgkflow/gpu/strategies/row_pair.py).
//
// The lane owns outputs (x, u) and (7 - x, 7 - u) of a tile pair, x = lane / 8, u = lane % 8,
// and walks the CSR rows 8I + x of G1 and 8I2 + u of G2 (all their octiles at once): every
// trip is one product; with the nodes of each tile sorted by degree the heavy rows pair with
// light ones (lane efficiency ~0.7 on BA vs ~0.3 for octile pairs). row_pair() is in
// octile_primitives.cuh (shared with the wide path).
//
// Contract with mgk_solver.cu (macros, so that the solver compiles to the same code as when the
// mappings were written inline: device functions taking a lane struct changed the register
// allocation at the 64-register bound and spilled): XMV_LANE_SETUP declares const int oa, ob
// (the lane's two outputs of a tile pair) from `lane`; XMV_TILE_PAIR(acca, accb) adds the
// lane's two sums of tile pair (I, I2) of graphs h1, h2 with search direction P (nt2 tiles per
// G2 side) using the strategy's kernel parameters.
#define XMV_LANE_SETUP                                                                             \
    const int rx = lane >> 3, ru = lane & 7;                                                       \
    const int oa = rx * 8 + ru, ob = (7 - rx) * 8 + (7 - ru);

#define XMV_TILE_PAIR(acca, accb)                                                                  \
    {                                                                                              \
        const int* ra_ = rrowptr + h1.rrow_off + I * 8;                                            \
        const int* rb_ = rrowptr + h2.rrow_off + I2 * 8;                                           \
        acca = row_pair(ra_[rx], ra_[rx + 1], rb_[ru], rb_[ru + 1], P, nt2, rcoff, rweight, relab, \
                        relab_stride);                                                             \
        accb = row_pair(ra_[7 - rx], ra_[8 - rx], rb_[7 - ru], rb_[8 - ru], P, nt2, rcoff, rweight, \
                        relab, relab_stride);                                                      \
    }
