"""Training queues (`queues:`): AWS Batch job queues of SageMaker training jobs, shared by teams.

A queue is a Batch service environment (its capacity limit: how many instances its jobs may hold
at once), a job queue of type SAGEMAKER_TRAINING, and — where teams share it — a fair-share
scheduling policy with a weight per share. A job with `queue:` is submitted to it as a Batch service
job whose payload is the job's unchanged CreateTrainingJob body (as the SageMaker Python SDK v3's
TrainingQueue submits it); Batch starts the training job when the queue's capacity and share allow.
"""
