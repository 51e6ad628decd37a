# Put on the PYTHONPATH of GradBench's evals only (run.sh does), never of a tool.
# The evals validate responses with pydantic 2's `Model.model_validate(obj)`; Debian 12 ships
# pydantic 1.10, which calls it `Model.parse_obj(obj)`. With pydantic 2 this file does nothing.
try:
    import pydantic
except ImportError:  # the eval's own import then names what is missing
    pydantic = None

if pydantic is not None and not hasattr(pydantic.BaseModel, "model_validate"):
    pydantic.BaseModel.model_validate = classmethod(lambda cls, obj: cls.parse_obj(obj))
