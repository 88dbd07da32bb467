"""The extension's device API: the functions that take device addresses and stream
handles as ints (the GPU launches, the GPU packer's and the plan objects' makers).

The extension hands them out once, and this module claims them while ``fragmask`` is
imported (before any user code can import ``fragmask._fragmask``), so no function a user
reaches by importing the extension dereferences an integer it is given. Only the
package's wrappers call them, with ``data_ptr()`` of torch tensors they checked and
torch's own stream handles.
"""

from . import _fragmask

API = _fragmask.claim_device_api()
