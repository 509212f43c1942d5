# Writes OUT, a C++ file defining loom::ClusterPresetFiles() over FILES
# (paths under ROOT, separated by '|'), each file's text as a raw string literal.
# Run by cost_model/CMakeLists.txt whenever a preset changes.
string(REPLACE "|" ";" FILES "${FILES}")
list(SORT FILES)
set(body "")
foreach(file ${FILES})
  get_filename_component(name ${file} NAME_WE)
  file(RELATIVE_PATH rel ${ROOT} ${file})
  file(READ ${file} text)
  string(FIND "${text}" ")loom_preset\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${rel} contains the raw-string delimiter")
  endif()
  string(APPEND body "      {\"${name}\", \"${rel}\", R\"loom_preset(${text})loom_preset\"},\n")
endforeach()
file(WRITE ${OUT}.tmp
"// Generated from configs/clusters/ by cost_model/embed_presets.cmake.
#include \"cost_model/cluster_presets.h\"

namespace loom {

const std::vector<ClusterPresetFile>& ClusterPresetFiles() {
  static const auto* const files = new std::vector<ClusterPresetFile>{
${body}  };
  return *files;
}

}  // namespace loom
")
# Only touch OUT when it changes, so an unrelated reconfigure rebuilds nothing.
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.tmp ${OUT})
file(REMOVE ${OUT}.tmp)
