-- The paper's Figure 1 (AutoTQA): the HR system's tables. Built into figure1.sqlite by
-- dagwright.data.demo.load_figure1; the finance department's Salary table is salary.csv, so
-- "What is the year-end bonus for Tom?" needs a join across the two sources.
-- The figure writes the employee ids as 001 and 002; they are integers here so that the
-- SQLite column and the CSV column (whose type is inferred) compare without a cast.
CREATE TABLE Department (
    Depno INTEGER PRIMARY KEY,
    DepName TEXT NOT NULL
);

CREATE TABLE Employee (
    ID INTEGER PRIMARY KEY,
    Name TEXT NOT NULL,
    Email TEXT,
    Depno INTEGER REFERENCES Department (Depno)
);

INSERT INTO Department (Depno, DepName) VALUES (1, 'R&D'), (2, 'FINANCE');

INSERT INTO Employee (ID, Name, Email, Depno) VALUES
    (1, 'Lucy', 'lucy@com', 1),
    (2, 'Tom', 'tom@com', 2);
