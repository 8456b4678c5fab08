-- Loads the project's golden set into feedback_golden and feedback_golden_judgments, matching judged notes by
-- task_type and lesson (load data/sample_notes.csv first). psql variables: golden_questions and
-- golden_judgments, absolute paths of data/golden_questions.csv and data/golden_judgments.csv (read by the
-- server).
CREATE TEMP TABLE golden_questions_csv (qid text, split text, kind text, task_type text, question text);
COPY golden_questions_csv FROM :'golden_questions' WITH (FORMAT csv, HEADER true);
CREATE TEMP TABLE golden_judgments_csv (qid text, grade smallint, lesson text);
COPY golden_judgments_csv FROM :'golden_judgments' WITH (FORMAT csv, HEADER true);
INSERT INTO feedback_golden (query, task_type, split)
SELECT question, task_type, split FROM golden_questions_csv ORDER BY qid;
INSERT INTO feedback_golden_judgments (golden_id, note_id, grade)
SELECT g.id, n.id, j.grade
  FROM golden_judgments_csv j
  JOIN golden_questions_csv q USING (qid)
  JOIN feedback_golden g ON g.query = q.question AND g.task_type = q.task_type
  JOIN feedback_notes n ON n.task_type = q.task_type AND n.lesson = j.lesson;
DROP TABLE golden_questions_csv, golden_judgments_csv;
