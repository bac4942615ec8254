"""The text the local LLM's tokenizer and weights are trained on: a few paragraphs written for
sagestack (nothing is downloaded), about the work the tool does, so that a generation reads as
words of its field rather than noise."""

from __future__ import annotations

PARAGRAPHS = (
    "A training job reads its data from the input channels, writes checkpoints to the checkpoint "
    "folder and saves the model where the container expects it. When the job ends, SageMaker packs "
    "the model folder and uploads it to the bucket.",
    "Spot training saves money when the script checkpoints and resumes. The instance may be taken "
    "back at any time; the next instance starts from the newest checkpoint and trains to the end.",
    "Data parallel training copies the model to every GPU. Each process reads its own share of the "
    "batch, and the gradients are averaged before the optimizer takes a step.",
    "A larger global batch needs a larger learning rate, warmed up over the first steps. Gradient "
    "accumulation reaches the same batch on fewer devices, one micro batch at a time.",
    "The endpoint serves the model on an instance fleet. Autoscaling adds instances when the "
    "invocations per instance grow and removes them when the traffic falls.",
    "A language model predicts the next token from the tokens before it. The tokenizer turns text "
    "into tokens, the model turns tokens into probabilities, and sampling picks the next token.",
    "Tensor parallel serving splits every layer of a large model over the GPUs of one instance. "
    "The weights must fit the memory of those GPUs, with room left for the cache of keys and values.",
    "Quantization stores the weights in fewer bits. A model in four bits takes a quarter of the "
    "memory it takes in sixteen, and often answers almost as well.",
    "The plan checks every quota before anything is deployed: the instance types of each job and "
    "endpoint, the count each needs, and the price of an hour and of a month.",
    "A shadow variant receives a copy of the production traffic. Its answers are logged and "
    "compared, and only production answers the caller.",
    "Every request is checked against the service model before the stack is deployed, so a wrong "
    "field is found at synth, with the file and the line that wrote it.",
    "The pipeline trains, compiles and registers the model. Promotion pins the registered package in "
    "the next environment, and the pin is reviewed in git like any other change.",
)


def corpus(repeat: int = 4) -> list[str]:
    """The training text, one paragraph per item, repeated so a few hundred steps see it all."""
    return [p for _ in range(repeat) for p in PARAGRAPHS]
