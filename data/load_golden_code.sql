-- Loads the code-input golden set (data/golden_code/*.jsonl: review inputs written by six independent authors,
-- each graded against every note of its task_type) into feedback_golden and feedback_golden_judgments, matching
-- graded notes by task_type and lesson (load data/sample_notes.csv first). Split by author: A-D tune, E and F
-- test, so a test number says how retrieval does on inputs someone else wrote. psql variable: golden_code, the
-- absolute path of data/golden_code (read by the server).
CREATE TEMP TABLE golden_code_lines (author text, line jsonb);
CREATE TEMP TABLE golden_code_raw (line text);
\set f :golden_code '/A.jsonl'
COPY golden_code_raw FROM :'f' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02');
INSERT INTO golden_code_lines SELECT 'A', line::jsonb FROM golden_code_raw; TRUNCATE golden_code_raw;
\set f :golden_code '/B.jsonl'
COPY golden_code_raw FROM :'f' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02');
INSERT INTO golden_code_lines SELECT 'B', line::jsonb FROM golden_code_raw; TRUNCATE golden_code_raw;
\set f :golden_code '/C.jsonl'
COPY golden_code_raw FROM :'f' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02');
INSERT INTO golden_code_lines SELECT 'C', line::jsonb FROM golden_code_raw; TRUNCATE golden_code_raw;
\set f :golden_code '/D.jsonl'
COPY golden_code_raw FROM :'f' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02');
INSERT INTO golden_code_lines SELECT 'D', line::jsonb FROM golden_code_raw; TRUNCATE golden_code_raw;
\set f :golden_code '/E.jsonl'
COPY golden_code_raw FROM :'f' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02');
INSERT INTO golden_code_lines SELECT 'E', line::jsonb FROM golden_code_raw; TRUNCATE golden_code_raw;
\set f :golden_code '/F.jsonl'
COPY golden_code_raw FROM :'f' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02');
INSERT INTO golden_code_lines SELECT 'F', line::jsonb FROM golden_code_raw; TRUNCATE golden_code_raw;
CREATE TEMP TABLE golden_code AS
SELECT l.line ->> 'id' AS input_id, l.line ->> 'task_type' AS task_type,
       coalesce((l.line ->> 'question') || E'\n', '') || (l.line ->> 'input') AS query,
       CASE WHEN l.author IN ('E', 'F') THEN 'test' ELSE 'tune' END AS split, l.line -> 'grades' AS grades
  FROM golden_code_lines l;
INSERT INTO feedback_golden (query, task_type, split)
SELECT query, task_type, split FROM golden_code ORDER BY input_id;
INSERT INTO feedback_golden_judgments (golden_id, note_id, grade)
SELECT g.id, n.id, j.value::smallint
  FROM golden_code c
 CROSS JOIN LATERAL jsonb_each_text(c.grades) j
  JOIN feedback_golden g ON g.query = c.query AND g.task_type = c.task_type
  JOIN feedback_notes n ON n.task_type = c.task_type AND n.lesson = j.key;
DROP TABLE golden_code_lines, golden_code_raw, golden_code;
