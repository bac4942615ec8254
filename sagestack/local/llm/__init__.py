"""Local LLM serving (`sagestack local serve` of an endpoint with `llm:`): the endpoint in its
container's request and response schema (protocol.py: LMI for djl-lmi, djl-tensorrtllm and
djl-neuronx; TGI; the OpenAI-style routes they and the vLLM and SGLang images take), streamed as
the runtime frames InvokeEndpointWithResponseStream (response_stream.py: the AWS event stream), with
small weights made here when the project has none (weights.py, trained on corpus.py's text). Built
on the serving room's ASGI server and local S3 paths. Judged by the LMI and TGI containers'
documented schemas and by boto3's own sagemaker-runtime client, whose event-stream parser reads the
frames (tests/training_src/test_local_llm_serve.py)."""
