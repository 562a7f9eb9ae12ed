#!/usr/bin/env python3
# Per seed and mix: PyTorch's reserved / live and reserved / allocated, ArenaPool's held / live (from
# replay_vs_torch.py --json). python3 summarize.py churn_vs_torch.json.xz > summary.txt
import json, lzma, statistics, sys
rows={}
for fn in sys.argv[1:]:
    for r in json.load(lzma.open(fn) if fn.endswith('.xz') else open(fn)):
        t=r['torch']; live=t['peak_live']
        arena=[c for c in r['clpool']['configurations'] if c['name']=='ArenaPool'][0]
        live_c=[c for c in r['clpool']['configurations'] if c['name']=='no pool'][0]['peak_bytes_held']
        rows[r['trace']]=(t['max_memory_reserved']/live, t['max_memory_reserved']/t['max_memory_allocated'], arena['peak_held_over_peak_live'], live, live_c)
for mix in ['tensors','loguniform']:
    ks=sorted([k for k in rows if f'_{mix}_' in k], key=lambda k:int(k.split('seed')[1].split('.')[0]))
    print(mix)
    for k in ks: print('  %-32s torch reserved/live %.3f  reserved/allocated %.3f  ArenaPool held/live %.3f  live %d %d' % ((k,)+rows[k]))
    for i,name in [(0,'torch/live'),(1,'torch res/alloc'),(2,'arena')]:
        v=[rows[k][i] for k in ks]; print('  %s mean %.3f max %.3f min %.3f' % (name, statistics.mean(v), max(v), min(v)))
    lower=sum(1 for k in ks if rows[k][2] < rows[k][0]); print('  ArenaPool lower than torch reserved/live on %d of %d' % (lower,len(ks)))
