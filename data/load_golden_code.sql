-- Loads the code-input golden set (data/golden_code/*.jsonl: review inputs written by ten independent authors,
-- each graded against every note of its task_type) into feedback_golden and feedback_golden_judgments, matching
-- graded notes by task_type and lesson (load data/sample_notes.csv first). Split by author (the id's prefix):
-- A-D and G-J tune, E and F test, so a test number says how retrieval does on inputs someone else wrote. psql variable:
-- golden_code, the absolute path of data/golden_code (read by the server: a superuser or pg_read_server_files).
CREATE TEMP TABLE golden_code AS
SELECT o ->> 'id' AS input_id, o ->> 'task_type' AS task_type,
       coalesce((o ->> 'question') || E'\n', '') || (o ->> 'input') AS query,
       CASE WHEN split_part(o ->> 'id', '-', 1) IN ('E', 'F') THEN 'test' ELSE 'tune' END AS split,
       o -> 'grades' AS grades
  FROM unnest(ARRAY['A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'I', 'J']) AS author,
       regexp_split_to_table(pg_read_file(:'golden_code' || '/' || author || '.jsonl'), E'\n') AS line,
       LATERAL (SELECT line::jsonb AS o) j
 WHERE btrim(line) <> '';
INSERT INTO feedback_golden (query, task_type, split)
SELECT query, task_type, split FROM golden_code ORDER BY input_id;
INSERT INTO feedback_golden_judgments (golden_id, note_id, grade)
SELECT g.id, n.id, j.value::smallint
  FROM golden_code c
 CROSS JOIN LATERAL jsonb_each_text(c.grades) j
  JOIN feedback_golden g ON g.query = c.query AND g.task_type = c.task_type
  JOIN feedback_notes n ON n.task_type = c.task_type AND n.lesson = j.key;
DROP TABLE golden_code;
