#!/usr/bin/env bash
# On the GPU machine, from the repository root after scripts/gpu-pack.sh: the
# GPU correctness tests, then the whole bench; a short table is printed last.
# OUT names the folder for the logs and tables.
tar -C .carry -xJf .carry/pack.tar.xz && export LD_LIBRARY_PATH=.carry/lib
.carry/bin/test_gpu_ops --jobs=4 > $OUT/t.txt 2>&1; tail -3 $OUT/t.txt
.carry/bin/test_gpu_kernels --jobs=4 > $OUT/t2.txt 2>&1; tail -2 $OUT/t2.txt
timeout 150 .carry/bin/tileops-bench --json $OUT/b.json > $OUT/b.md 2> $OUT/b.log
python3 - <<'P'
import json,os
d=json.load(open(os.environ['OUT']+'/b.json'))
print('copy',d['copy_tbps'],'empty',d['empty_graph_us'])
for r in d['results']:
    if not r['ok']: print(r['op'],r['label'],'ERR'); continue
    g=r.get('graph_us'); 
    print('%s|%s|%s|%.1f|%s|%.1f'%(r['op'],r['label'][:24],r['dtype'],r['median_us'],'' if g is None else '%.2f'%g,r['pct_copy']))
P
