"""The pipeline a team would build without pg_feedback, step by step as the seed article describes it:
a Python service with psycopg + onnxruntime + pgvector SQL + a cross-encoder.

1. embed the question in Python (bge-small-en-v1.5 int8, query prefix, CLS pooling, L2 normalisation);
2. send the vector to Postgres: pgvector nearest neighbours filtered by task_type and status, 20 candidates;
3. rerank the candidates in Python with ms-marco-MiniLM-L-12-v2 (lesson + correction, one padded batch with the
   real attention mask);
4. keep scores at or above the floor, best 3.

Same model files, same thread count (1 intra-op thread), same floor as fb_retrieve; models are loaded once at
start-up, as a long-running service would. Only step 1-4 per query is timed.
"""

import time

import numpy as np

from common import Model, connect


class SeedPipeline:
    def __init__(self, port, db, floor):
        self.embedder = Model("bge-small-en-v1.5")
        self.reranker = Model("ms-marco-MiniLM-L-12-v2")
        self.conn = connect(port, db)
        self.floor = floor

    def embed_query(self, text):
        v = self.embedder.run([self.embedder.manifest["query_prefix"] + text])[0][0]
        return v / np.linalg.norm(v)

    def retrieve(self, question, task_type, candidate_k=20, final_k=3):
        q = self.embed_query(question)
        vec = "[" + ",".join(f"{x:.7g}" for x in q) + "]"
        cands = self.conn.execute(
            "SELECT id, lesson, correction FROM feedback_notes "
            "WHERE task_type = %s AND status = 'active' ORDER BY embedding <=> %s::vector LIMIT %s",
            (task_type, vec, candidate_k)).fetchall()
        if not cands:
            return []
        scores = self.reranker.run([(question, f"{c[1]} {c[2]}") for c in cands])[:, 0]
        kept = sorted(((s, c[0]) for s, c in zip(scores, cands) if s >= self.floor), reverse=True)
        return [i for _, i in kept[:final_k]]


def latency(port, db, qs, floor):
    pipeline = SeedPipeline(port, db, floor)
    pipeline.retrieve("warm-up question", qs[0][1])
    lat, rows = [], 0
    for q, t in qs:
        t0 = time.perf_counter()
        rows += len(pipeline.retrieve(q, t))
        lat.append((time.perf_counter() - t0) * 1000)
    return lat, rows / len(qs)
