-- Gives the sample notes their contexts: the reviewed input each correction was made on (data/sample_contexts.csv,
-- written for this project by an author who wrote none of the golden code inputs), matched by task_type and lesson
-- (load data/sample_notes.csv first). Needs UPDATE on feedback_notes (the owner or a superuser); the update
-- trigger redacts them. psql variable: sample_contexts, the absolute path of data/sample_contexts.csv (read by the
-- server).
CREATE TEMP TABLE sample_contexts_csv (task_type text, lesson text, context text);
COPY sample_contexts_csv FROM :'sample_contexts' WITH (FORMAT csv, HEADER true);
UPDATE feedback_notes n SET context = c.context
  FROM sample_contexts_csv c
 WHERE n.task_type = c.task_type AND n.lesson = c.lesson AND n.context IS DISTINCT FROM c.context;
DROP TABLE sample_contexts_csv;
