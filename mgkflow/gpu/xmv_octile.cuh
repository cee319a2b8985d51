// XMV fragment of the per-block solver, strategy "octile" (mgkflow/gpu/strategies/octile.py).
//
// The lane owns rows i = lane / 4 of the G1 octile and i2 = lane % 4, lane % 4 + 4 of the G2
// octile and runs one of the primitives of octile_primitives.cuh per octile pair (ADAPTIVE:
// chosen from the measured selection map, else sparse x sparse everywhere).
//
// Contract with mgk_solver.cu: see xmv_row_pair.cuh (XMV_LANE_SETUP, XMV_TILE_PAIR, XMV_TP_COST).
#define XMV_LANE_SETUP                                                                             \
    const int i = lane >> 2, i2a = lane & 3;                                                       \
    const int oa = i * 8 + i2a, ob = oa + 4;                                                       \
    const LaneRows L = lane_rows(lane);

#if ADAPTIVE
#define XMV_OCTILE_PAIR(acca, accb)                                                                \
    octile_pair_select(__ldg(map_row + __popcll(bm2)), bm1, toff1, bm2, toff[tb], Pt, L, weight, elab, \
                       elab_stride, acca, accb);
#define XMV_MAP_ROW const unsigned char* map_row = prim_map + __popcll(bm1) * 65;
#else
#define XMV_OCTILE_PAIR(acca, accb)                                                                \
    octile_pair<PRIM_SS>(bm1, toff1, bm2, toff[tb], Pt, L, weight, elab, elab_stride, acca, accb);
#define XMV_MAP_ROW
#endif

#define XMV_TILE_PAIR(acca, accb)                                                                  \
    {                                                                                              \
        const int a0 = rowptr[h1.rowptr_off + I], a1 = rowptr[h1.rowptr_off + I + 1];              \
        const int b0 = rowptr[h2.rowptr_off + I2], b1 = rowptr[h2.rowptr_off + I2 + 1];            \
        for (int ta = a0; ta < a1; ++ta) {                                                         \
            const int J = tile_col[ta];                                                            \
            const unsigned long long bm1 = bitmap[ta];                                             \
            const int toff1 = toff[ta];                                                            \
            XMV_MAP_ROW                                                                            \
            for (int tb = b0; tb < b1; ++tb) {                                                     \
                const int J2 = tile_col[tb];                                                       \
                const unsigned long long bm2 = bitmap[tb];                                         \
                const double* Pt = P + ((long long)(J * nt2 + J2) << 6);                           \
                XMV_OCTILE_PAIR(acca, accb)                                                        \
            }                                                                                      \
        }                                                                                          \
    }

// The schedule's cost of tile pair u (SCHEDULE_RANGES): its octile pairs, each one primitive call per lane.
#define XMV_TP_COST(c, u)                                                                          \
    {                                                                                              \
        const int I_ = (u) / nt2, I2_ = (u) - I_ * nt2;                                            \
        c = (rowptr[h1.rowptr_off + I_ + 1] - rowptr[h1.rowptr_off + I_]) *                        \
                (rowptr[h2.rowptr_off + I2_ + 1] - rowptr[h2.rowptr_off + I2_]) + 1;               \
    }
