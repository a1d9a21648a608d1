-- A second database on the same server for the MLflow tracking server (the job store uses "adlrec").
CREATE DATABASE mlflow OWNER adlrec;
