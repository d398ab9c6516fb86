#!/bin/sh
# Entry point of the gateway Lambda under the AWS Lambda Web Adapter (response_stream mode): the adapter forwards
# API Gateway requests to this uvicorn on $PORT (default 8080). Configuration comes from the environment
# (asya_gateway.config); the app is built by the factory, never at import.
# A script started by the exec wrapper gets only PYTHONPATH=$LAMBDA_RUNTIME_DIR: the function code and the layers'
# python/ directories (uvicorn, starlette, the asya package) are put on the path here, in Lambda's own order.
export PYTHONPATH="${LAMBDA_TASK_ROOT:-/var/task}:/opt/python${PYTHONPATH:+:$PYTHONPATH}"
exec python -m uvicorn asya_gateway.app:create_app --factory --host 0.0.0.0 --port "${PORT:-8080}"
